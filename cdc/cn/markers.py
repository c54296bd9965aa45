"""Markers: instructions (CdcStart, StorageChange, MetaChange, FlushLogs) and DDL records, each
an ordinary TSO transaction on a private broadcast table, so every DN sees it at the same TSO."""

from __future__ import annotations

import json
from typing import Any

from cdc.cn import schema
from cdc.cn.context import CnContext
from cdc.cn.errors import CnError
from cdc.cn.transaction import Transaction


def dn_addresses(ctx: CnContext) -> dict[int, dict[str, Any]]:
    return {
        n.id: {"host": n.host, "port": n.port, "server_id": n.server_id, "name": n.name}
        for n in ctx.config.dn
    }


def topology(ctx: CnContext) -> dict[str, Any]:
    """The full topology JSON (DN list + logical-to-physical map) as of now."""
    return ctx.catalogue.topology(dn_addresses(ctx))


async def write_instruction(ctx: CnContext, type_: str, content: dict[str, Any]) -> int:
    """Insert one `__cdc_instruction__` row on every storage DN; returns its TSO."""
    if type_ not in schema.INSTRUCTION_TYPES:
        raise CnError(f"unknown instruction type {type_!r} (one of {schema.INSTRUCTION_TYPES})")
    tx = Transaction(ctx, kind=type_)
    async with tx:
        await tx.execute_private(
            f"INSERT INTO `{schema.PRIVATE_DB}`.`{schema.INSTRUCTION}` (id, type, content) "
            "VALUES (%s, %s, %s)",
            (tx.txn_id, type_, json.dumps(content, sort_keys=True)),
        )
    return tx.commit_tso


async def write_ddl_record(
    ctx: CnContext, db: str, table: str, ddl: str, logical_schema: dict[str, Any] | None
) -> int:
    """Insert one `__cdc_ddl_record__` row on every storage DN; returns its TSO."""
    tx = Transaction(ctx, kind="ddl")
    async with tx:
        await tx.execute_private(
            f"INSERT INTO `{schema.PRIVATE_DB}`.`{schema.DDL_RECORD}` "
            "(id, db, tbl, ddl, schema_json) VALUES (%s, %s, %s, %s, %s)",
            (tx.txn_id, db, table, ddl, json.dumps(logical_schema, sort_keys=True)),
        )
    return tx.commit_tso
