"""Logical DDL: run on every physical shard, update the catalogue, then write a DDL record
marker (a TSO transaction on every DN) with the logical DDL text and the new logical schema.

Supported: CREATE TABLE, DROP TABLE, ALTER TABLE (ADD/DROP/MODIFY COLUMN, ADD/DROP INDEX, ...
anything that keeps the shard key), TRUNCATE TABLE.
"""

from __future__ import annotations

import re
from typing import Any

import pymysql

from cdc.cn_protocol.catalogue import (
    BROADCAST,
    PARTITIONED,
    LogicalTable,
    physical_db,
    physical_table,
)
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.markers import write_ddl_record
from cdc.cn_protocol.sql_text import DdlTarget, parse_ddl
from cn.cluster_change import Progress, cluster_change
from cn.context import CnContext

DEFAULT_PARTITIONS = 8


async def execute_ddl(
    ctx: CnContext,
    store: CatalogueStore,
    sql: str,
    *,
    default_db: str | None = None,
    shard_key: str | None = None,
    partitions: int = DEFAULT_PARTITIONS,
    broadcast: bool = False,
    progress: Progress | None = None,
) -> int | None:
    """Run a logical DDL statement as a cluster change; returns the DDL record's TSO (None if
    IF [NOT] EXISTS made it a no-op)."""
    target = parse_ddl(sql, default_db)
    async with cluster_change(ctx, store, f"DDL on {target.db}.{target.table}", progress) as change:
        cat = ctx.catalogue  # re-read under the change lock
        exists = cat.has(target.db, target.table)
        if target.verb == "CREATE":
            if exists:
                if target.if_clause:
                    return None
                raise CatalogueError(f"logical table {target.db}.{target.table} already exists")
            if not broadcast and not shard_key:
                raise CatalogueError(
                    f"CREATE TABLE {target.db}.{target.table}: give shard_key=... (partitioned) "
                    "or broadcast=True"
                )
            dns = cat.dns
            table = LogicalTable(
                target.db,
                target.table,
                BROADCAST if broadcast else PARTITIONED,
                None if broadcast else shard_key.lower(),
                [] if broadcast else [dns[i % len(dns)] for i in range(partitions)],
            )
            for dn in cat.dns_of(table):
                await ctx.pools.execute(
                    dn,
                    f"CREATE DATABASE IF NOT EXISTS `{physical_db(table.db)}` CHARACTER SET utf8mb4",
                )
        else:
            if not exists:
                if target.if_clause:
                    return None
                raise CatalogueError(f"unknown logical table {target.db}.{target.table}")
            table = cat.table(target.db, target.table)
        # No DML through any CN between the first shard's DDL and the DDL record: otherwise a
        # row written to an already-altered shard would reach the global binlog before the
        # logical DDL (at the record's TSO) with a column set the downstream does not have yet.
        await change.freeze(gate_keys(table))
        tso = await _apply(ctx, store, table, sql, target)
        change.progress(f"ran on every shard; DDL record at TSO {tso}")
        return tso


def gate_keys(table: LogicalTable) -> set[tuple[str, str, int]]:
    if table.is_broadcast:
        return {(table.db, table.name, -1)}
    return {(table.db, table.name, p) for p in range(table.partitions)}


async def _apply(
    ctx: CnContext, store: CatalogueStore, table: LogicalTable, sql: str, target: DdlTarget
) -> int:
    cat = ctx.catalogue
    await _run_on_shards(ctx, table, sql, target)
    if target.verb == "DROP":
        cat.drop(table.db, table.name)
        await store.delete_table(table.db, table.name)
        new_schema = None
    else:
        table.schema = await logical_schema(ctx, table)
        cat.put(table)
        await store.save_table(table)
        # MergeSource renames this table's physical shards from the record's TSO on.
        new_schema = {**table.schema, "topology": table.to_json(cat.dns)}
    return await write_ddl_record(ctx, table.db, table.name, sql, new_schema)


async def _run_on_shards(ctx: CnContext, table: LogicalTable, sql: str, target: DdlTarget) -> None:
    shards = (
        [(dn, None) for dn in ctx.catalogue.dns]
        if table.is_broadcast
        else [(dn, p) for p, dn in enumerate(table.placement)]
    )
    for done, (dn, p) in enumerate(shards):
        physical = sql[: target.name_start] + table.physical_name(p) + sql[target.name_end :]
        try:
            await ctx.pools.execute(dn, physical)
        except pymysql.err.MySQLError as exc:
            raise CatalogueError(
                f"{table.db}.{table.name}: the DDL failed on DN {dn} "
                f"({table.physical_name(p)}): {exc.args[-1] if exc.args else exc}; it ran on "
                f"{done} of {len(shards)} shards before"
                + (" (nothing changed)" if done == 0 else ": fix it and run it again")
            ) from None


async def logical_schema(ctx: CnContext, table: LogicalTable) -> dict[str, Any]:
    """The logical schema JSON (columns + logical CREATE TABLE), read from one physical shard."""
    part = None if table.is_broadcast else 0
    dn = ctx.catalogue.dns[0] if table.is_broadcast else table.placement[0]
    phys_table = physical_table(table.name, part)
    columns = await ctx.pools.execute(
        dn,
        "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_KEY, "
        "CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (table.physical_db, phys_table),
    )
    ((_, create),) = await ctx.pools.execute(dn, f"SHOW CREATE TABLE {table.physical_name(part)}")
    create = re.sub(r"^CREATE TABLE `[^`]+`", f"CREATE TABLE `{table.name}`", create, count=1)
    return {
        "db": table.db,
        "table": table.name,
        "kind": table.kind,
        "shard_key": table.shard_key,
        "partitions": table.partitions,
        "columns": [
            {
                "name": c[0],
                "type": c[1],
                "nullable": c[2] == "YES",
                "default": c[3],
                "key": c[4],
                "charset": c[5],
                "collation": c[6],
            }
            for c in columns
        ],
        "create": create,
    }
