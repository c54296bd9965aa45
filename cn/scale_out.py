"""Scale-out: add a DN to the topology (StorageChange), move some partitions to it (copy, switch,
delete) and record the switch (MetaChange with the before/after map)."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

from cdc.cn_protocol import schema
from cdc.cn_protocol.catalogue import LogicalTable, physical_db
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.markers import write_instruction
from cdc.cn_protocol.sql import literal
from cn.cluster_change import Progress, cluster_change
from cn.context import CnContext
from cn.markers import dn_addresses, topology

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


async def add_dn(
    ctx: CnContext, store: CatalogueStore, dn_id: int, progress: Progress | None = None
) -> ScaleOutResult:
    """Add DN `dn_id` (one cluster change: broadcast tables frozen while they are copied to it),
    then move its share of partitions to it, one cluster change per partition: only the
    partition being copied is frozen, on every CN, while it is copied and switched."""
    async with cluster_change(ctx, store, f"add DN {dn_id}", progress) as change:
        cat = ctx.catalogue
        if dn_id in cat.dns:
            raise CatalogueError(f"DN {dn_id} is already a storage DN")
        ctx.pools.node(dn_id)  # must be configured
        # Broadcast writes go to every storage DN: none while their copy is made.
        await change.freeze({(t.db, t.name, -1) for t in cat.tables.values() if t.is_broadcast})
        cat = ctx.catalogue
        await _prepare_new_dn(ctx, dn_id)
        # StorageChange is written by the current DNs only, naming the new one; the new DN
        # takes part in transactions (heartbeats, markers, broadcast writes) only after it. So
        # every transaction that touches the new DN has a TSO above the marker, where the
        # pipeline starts merging its binlog (dumper/pipeline/leader.py).
        dns = topology(ctx)["dns"]
        new_entry = {"id": dn_id, **dn_addresses(ctx).get(dn_id, {})}
        storage_tso = await write_instruction(
            ctx, schema.STORAGE_CHANGE, {"dns": [*dns, new_entry], "added": [dn_id]}
        )
        change.progress(f"DN {dn_id} prepared; StorageChange at TSO {storage_tso}")
        await store.save_dns([ctx.pools.node(dn_id)])
        await store.add_storage([dn_id])
        cat.dns.append(dn_id)
        moves = plan_moves(cat.tables.values(), cat.dns, dn_id)
    meta_tso, moved = None, []
    for m in moves:
        tso = await move_partition(
            ctx, store, m.table.db, m.table.name, m.partition, dn_id, progress
        )
        if tso is not None:
            meta_tso = tso
            moved.append((m.table.db, m.table.name, m.partition, m.source, m.target))
    return ScaleOutResult(storage_tso, meta_tso, moved)


async def move_partition(
    ctx: CnContext,
    store: CatalogueStore,
    db: str,
    name: str,
    partition: int,
    target: int,
    progress: Progress | None = None,
) -> int | None:
    """Move one partition to DN `target`: freeze it on every CN, copy it, write MetaChange with
    the before/after map, switch the catalogue; then drop the old copy. Returns MetaChange's TSO
    (None if the partition is gone or already there)."""
    what = f"move {db}.{name} partition {partition} to DN {target}"
    async with cluster_change(ctx, store, what, progress) as change:
        if not ctx.catalogue.has(db, name):
            return None
        table = ctx.catalogue.table(db, name)
        if partition >= table.partitions or table.placement[partition] == target:
            return None
        await change.freeze({(table.db, table.name, partition)})
        cat = ctx.catalogue  # the follower reloaded it at the freeze
        table = cat.table(db, name)
        m = Move(table, partition, table.placement[partition], target)
        await _copy_partition(ctx, m)
        before = topology(ctx)
        after_tables = copy.deepcopy(cat.tables)
        after_tables[(db.lower(), name.lower())].placement[partition] = target
        saved, cat.tables = cat.tables, after_tables
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
                        "db": db,
                        "table": name,
                        "partition": partition,
                        "from": m.source,
                        "to": target,
                    }
                ],
            },
        )
        change.progress(f"copied from DN {m.source}; MetaChange at TSO {meta_tso}")
        table.placement[partition] = target  # the switch: every CN routes to the new copy
        await store.save_table(table)
    # No CN writes the old copy any more: each was frozen until it loaded the new placement.
    await ctx.pools.execute(m.source, f"DROP TABLE IF EXISTS {m.table.physical_name(partition)}")
    return meta_tso


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
