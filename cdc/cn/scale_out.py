"""Scale-out: add a DN to the topology (StorageChange), move some partitions to it (copy, switch,
delete) and record the switch (MetaChange with the before/after map)."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

from cdc.cn.context import CnContext
from cdc.cn.markers import dn_addresses, topology
from cdc.cn_protocol import schema
from cdc.cn_protocol.catalogue import LogicalTable, physical_db
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.markers import write_instruction
from cdc.cn_protocol.sql import literal

log = logging.getLogger(__name__)

COPY_BATCH = 500


@dataclass(frozen=True, slots=True)
class Move:
    table: LogicalTable
    partition: int
    source: int
    target: int


@dataclass(slots=True)
class ScaleOutResult:
    storage_change_tso: int
    meta_change_tso: int | None
    moved: list[tuple[str, str, int, int, int]]  # (db, table, partition, from DN, to DN)


async def add_dn(ctx: CnContext, store: CatalogueStore, dn_id: int) -> ScaleOutResult:
    cat = ctx.catalogue
    if dn_id in cat.dns:
        raise CatalogueError(f"DN {dn_id} is already a storage DN")
    ctx.pools.node(dn_id)  # must be configured
    await _prepare_new_dn(ctx, dn_id)
    # StorageChange is written by the current DNs only, naming the new one; the new DN takes
    # part in transactions (heartbeats, markers, broadcast writes) only after it. So every
    # transaction that touches the new DN has a TSO above the marker, where the pipeline
    # starts merging its binlog (dumper/pipeline/leader.py).
    dns = topology(ctx)["dns"]
    new_entry = {"id": dn_id, **dn_addresses(ctx).get(dn_id, {})}
    storage_tso = await write_instruction(
        ctx, schema.STORAGE_CHANGE, {"dns": [*dns, new_entry], "added": [dn_id]}
    )
    cat.dns.append(dn_id)
    await store.add_storage([dn_id])
    moves = plan_moves(cat.tables.values(), cat.dns, dn_id)
    if not moves:
        return ScaleOutResult(storage_tso, None, [])
    keys = {(m.table.db, m.table.name, m.partition) for m in moves}
    before = topology(ctx)
    await ctx.gate.freeze(keys)
    try:
        for m in moves:
            await _copy_partition(ctx, m)
        after_cat = copy.deepcopy(cat.tables)
        for m in moves:
            after_cat[(m.table.db.lower(), m.table.name.lower())].placement[m.partition] = m.target
        saved, cat.tables = cat.tables, after_cat
        after = topology(ctx)
        cat.tables = saved
        meta_tso = await write_instruction(
            ctx,
            schema.META_CHANGE,
            {
                "before": before,
                "after": after,
                "moved": [
                    {
                        "db": m.table.db,
                        "table": m.table.name,
                        "partition": m.partition,
                        "from": m.source,
                        "to": m.target,
                    }
                    for m in moves
                ],
            },
        )
        for m in moves:  # the switch: this CN routes to the new copy from now on
            m.table.placement[m.partition] = m.target
        for t in {(m.table.db, m.table.name): m.table for m in moves}.values():
            await store.save_table(t)
    finally:
        await ctx.gate.thaw(keys)
    for m in moves:  # delete the old copy (a physical DDL in the source DN's binlog)
        await ctx.pools.execute(
            m.source, f"DROP TABLE IF EXISTS {m.table.physical_name(m.partition)}"
        )
    return ScaleOutResult(
        storage_tso,
        meta_tso,
        [(m.table.db, m.table.name, m.partition, m.source, m.target) for m in moves],
    )


def plan_moves(tables, dns: list[int], new_dn: int) -> list[Move]:
    """Give the new DN its fair share of each partitioned table, taken from the fullest DNs."""
    moves = []
    for t in sorted(tables, key=lambda t: (t.db, t.name)):
        if t.is_broadcast or not t.placement:
            continue
        share = len(t.placement) // len(dns)
        counts = {dn: t.placement.count(dn) for dn in dns}
        for _ in range(share - counts.get(new_dn, 0)):
            source = max((dn for dn in dns if dn != new_dn), key=lambda d: (counts[d], -d))
            partition = max(
                p
                for p, dn in enumerate(t.placement)
                if dn == source and all(m.partition != p or m.table is not t for m in moves)
            )
            counts[source] -= 1
            counts[new_dn] = counts.get(new_dn, 0) + 1
            moves.append(Move(t, partition, source, new_dn))
    return moves


async def _prepare_new_dn(ctx: CnContext, dn_id: int) -> None:
    """Private tables, physical databases and broadcast tables (with their rows) on the new DN."""
    for sql in schema.PRIVATE_TABLES:
        await ctx.pools.execute(dn_id, sql)
    first = ctx.catalogue.dns[0]
    for db in sorted({t.db for t in ctx.catalogue.tables.values()}):
        await ctx.pools.execute(
            dn_id, f"CREATE DATABASE IF NOT EXISTS `{physical_db(db)}` CHARACTER SET utf8mb4"
        )
    for t in ctx.catalogue.tables.values():
        if t.is_broadcast:
            await _copy_table(ctx, t.physical_name(None), first, dn_id)


async def _copy_partition(ctx: CnContext, m: Move) -> None:
    await _copy_table(ctx, m.table.physical_name(m.partition), m.source, m.target)


async def _copy_table(ctx: CnContext, name: str, source: int, target: int) -> None:
    """Create `name` on `target` like on `source` and copy its rows. The copy is not binlogged
    (sql_log_bin=0): these rows are not new logical changes and must not reach the global binlog."""
    ((_, create),) = await ctx.pools.execute(source, f"SHOW CREATE TABLE {name}")
    db = name.split(".")[0]
    async with ctx.pools.connection(target) as dst, dst.cursor() as out:
        await out.execute(f"USE {db}")
        await out.execute(create.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
        await out.execute("SET SESSION sql_log_bin = 0")
        try:
            await out.execute(f"DELETE FROM {name}")
            async with ctx.pools.connection(source) as src, src.cursor() as cur:
                await cur.execute(f"SELECT * FROM {name}")
                columns = ", ".join(f"`{d[0]}`" for d in cur.description)
                while rows := await cur.fetchmany(COPY_BATCH):
                    values = ", ".join("(" + ", ".join(literal(v) for v in r) + ")" for r in rows)
                    await out.execute(f"INSERT INTO {name} ({columns}) VALUES {values}")
        finally:
            await out.execute("SET SESSION sql_log_bin = 1")
