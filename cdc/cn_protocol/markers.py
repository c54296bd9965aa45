"""Markers: instructions (CdcStart, StorageChange, MetaChange, FlushLogs) and DDL records, each
an ordinary TSO transaction on a private broadcast table, so every DN sees it at the same TSO."""

from __future__ import annotations

import json
from typing import Any

from cdc.cn_protocol import schema
from cdc.cn_protocol.context import ProtocolContext
from cdc.cn_protocol.errors import CnError
from cdc.cn_protocol.transaction import PrivateTransaction


async def write_instruction(
    ctx: ProtocolContext,
    type_: str,
    content: dict[str, Any],
    tx: PrivateTransaction | None = None,
) -> int:
    """Insert one `__cdc_instruction__` row on every storage DN; returns its TSO. `tx`: a
    transaction made beforehand (a job records its txn_id first, to check it after a crash)."""
    if type_ not in schema.INSTRUCTION_TYPES:
        raise CnError(f"unknown instruction type {type_!r} (one of {schema.INSTRUCTION_TYPES})")
    tx = tx or PrivateTransaction(ctx, kind=type_)
    async with tx:
        await tx.execute_private(
            f"INSERT INTO `{schema.PRIVATE_DB}`.`{schema.INSTRUCTION}` (id, type, content) "
            "VALUES (%s, %s, %s)",
            (tx.txn_id, type_, json.dumps(content, sort_keys=True)),
        )
    return tx.commit_tso


async def write_ddl_record(
    ctx: ProtocolContext,
    db: str,
    table: str,
    ddl: str,
    logical_schema: dict[str, Any] | None,
    tx: PrivateTransaction | None = None,
) -> int:
    """Insert one `__cdc_ddl_record__` row on every storage DN; returns its TSO (`tx`: as
    `write_instruction`'s)."""
    tx = tx or PrivateTransaction(ctx, kind="ddl")
    async with tx:
        await tx.execute_private(
            f"INSERT INTO `{schema.PRIVATE_DB}`.`{schema.DDL_RECORD}` "
            "(id, db, tbl, ddl, schema_json) VALUES (%s, %s, %s, %s, %s)",
            (tx.txn_id, db, table, ddl, json.dumps(logical_schema, sort_keys=True)),
        )
    return tx.commit_tso
