"""Scale-out as jobs (`jobs.py`): add a DN to the topology (StorageChange), then move its share
of partitions to it, each move a job of its own (copy, MetaChange with the before/after map,
switch, drop the old copy).

An added DN's job: freeze the broadcast tables, prepare the DN (private tables, databases,
broadcast copies), StorageChange, save it in the catalogue, thaw, then the moves. A move's job:
freeze the partition, copy it (checked: CHECKSUM TABLE of both copies), MetaChange, switch the
placement, thaw, drop the old copy. Either rolls back while its marker is not written (the DN
unreachable for `change_timeout_ms`): nothing in the catalogue names the new copy yet; after
the marker it only goes forward.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.cn_protocol import schema
from cdc.cn_protocol.catalogue import LogicalTable, physical_db
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.markers import write_instruction
from cdc.cn_protocol.sql import literal
from cdc.config import NodeConfig
from cdc.sql_literal import sql_identifier
from cdc_equipment.cn.context import CnContext
from cdc_equipment.cn.job_log import Job
from cdc_equipment.cn.jobs import JobRun, before_marker, marker_once
from cdc_equipment.cn.markers import dn_addresses, topology

log = logging.getLogger(__name__)

COPY_BATCH = 500
_AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=\d+")


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


def broadcast_keys(ctx: CnContext) -> set[tuple[str, str, int]]:
    return {(t.db, t.name, -1) for t in ctx.catalogue.tables.values() if t.is_broadcast}


class AddDnJob:
    kind = "add-dn"
    steps = ("freeze", "prepare", "storage_change", "catalogue", "thaw", "moves")

    def what(self, spec: dict[str, Any]) -> str:
        return f"add DN {spec['dn']}"

    async def plan(self, run: JobRun) -> dict[str, Any] | None:
        dn_id = run.job.spec["dn"]
        if dn_id in run.ctx.catalogue.dns:
            raise CatalogueError(f"DN {dn_id} is already a storage DN")
        # Where it is, for a CN taking the job over whose config predates the DN.
        return {"node": dataclasses.asdict(run.ctx.pools.node(dn_id))}

    async def locked(self, run: JobRun) -> None:
        ctx, job, dn_id = run.ctx, run.job, run.job.spec["dn"]
        if not ctx.pools.knows(dn_id):
            ctx.pools.add_node(NodeConfig(**job.detail["node"]))
        # Broadcast writes go to every storage DN: none while their copy is made.
        await run.freeze(broadcast_keys(ctx))
        if not job.done("prepare"):
            await run.retrying(f"DN {dn_id}", lambda: _prepare_new_dn(ctx, dn_id))
            await run.reached("prepare")
        if not job.done("storage_change"):
            # StorageChange is written by the current DNs only, naming the new one; the new DN
            # takes part in transactions (heartbeats, markers, broadcast writes) only after it.
            # So every transaction that touches the new DN has a TSO above the marker, where the
            # pipeline starts merging its binlog (dumper/pipeline/leader.py).
            dns = topology(ctx)["dns"]
            new_entry = {"id": dn_id, **dn_addresses(ctx).get(dn_id, {})}
            content = {"dns": [*dns, new_entry], "added": [dn_id]}
            tso = await marker_once(
                run,
                schema.STORAGE_CHANGE,
                lambda tx: write_instruction(ctx, schema.STORAGE_CHANGE, content, tx),
            )
            job.detail["result"] = {"storage_change_tso": tso, "meta_change_tso": None, "moved": []}
            run.progress(f"DN {dn_id} prepared; StorageChange at TSO {tso}")
            await run.reached("storage_change")
        if not job.done("catalogue"):
            await run.store.save_dns([ctx.pools.node(dn_id)])
            await run.store.add_storage([dn_id])
            if dn_id not in ctx.catalogue.dns:
                ctx.catalogue.dns.append(dn_id)
            await run.reached("catalogue")

    async def can_roll_back(self, run: JobRun) -> bool:
        return await before_marker(run, "storage_change")

    async def roll_back(self, run: JobRun) -> None:
        """Nothing names the DN yet (what was prepared on it stays, and is redone next time)."""

    async def unlocked(self, run: JobRun) -> None:
        """The DN's share of partitions, one move (a job of its own) at a time: only the
        partition being copied is frozen, on every CN, while it is copied and switched."""
        ctx, job, dn_id = run.ctx, run.job, run.job.spec["dn"]
        result = job.detail["result"]
        await run.runner.reload()
        for m in plan_moves(ctx.catalogue.tables.values(), ctx.catalogue.dns, dn_id):
            spec = {
                "db": m.table.db,
                "table": m.table.name,
                "partition": m.partition,
                "target": dn_id,
                "parent": job.id,
            }
            tso = await run.runner.run_unlocked_child("move", spec, run.progress)
            if tso is not None:
                result["meta_change_tso"] = tso
                result["moved"].append([m.table.db, m.table.name, m.partition, m.source, m.target])
                await run.log.save_detail(job)
            run.point("move")
        await run.reached("moves")

    def result(self, job: Job) -> ScaleOutResult:
        r = job.result
        return ScaleOutResult(
            r["storage_change_tso"], r["meta_change_tso"], [tuple(m) for m in r["moved"]]
        )


class MoveJob:
    kind = "move"
    steps = ("freeze", "copy", "meta_change", "catalogue", "thaw", "drop_old")

    def what(self, spec: dict[str, Any]) -> str:
        return f"move {spec['db']}.{spec['table']} partition {spec['partition']} to DN {spec['target']}"

    async def plan(self, run: JobRun) -> dict[str, Any] | None:
        spec, cat = run.job.spec, run.ctx.catalogue
        if not cat.has(spec["db"], spec["table"]):
            return None
        table = cat.table(spec["db"], spec["table"])
        p = spec["partition"]
        if p >= table.partitions or table.placement[p] == spec["target"]:
            return None
        return {"source": table.placement[p]}

    def _move(self, run: JobRun) -> Move:
        spec = run.job.spec
        table = run.ctx.catalogue.table(spec["db"], spec["table"])
        return Move(table, spec["partition"], run.job.detail["source"], spec["target"])

    async def locked(self, run: JobRun) -> None:
        ctx, job, spec = run.ctx, run.job, run.job.spec
        db, name, p, target = spec["db"], spec["table"], spec["partition"], spec["target"]
        await run.freeze({(db, name, p)})
        m = self._move(run)  # the catalogue as reloaded at the freeze
        if not job.done("copy"):
            await run.retrying(f"DNs {m.source} and {target}", lambda: _copy_checked(ctx, m))
            await run.reached("copy")
        if not job.done("meta_change"):
            content = _meta_change(ctx, m)
            tso = await marker_once(
                run,
                schema.META_CHANGE,
                lambda tx: write_instruction(ctx, schema.META_CHANGE, content, tx),
            )
            job.detail["result"] = {"meta_change_tso": tso}
            run.progress(f"copied from DN {m.source}; MetaChange at TSO {tso}")
            await run.reached("meta_change")
        if not job.done("catalogue"):
            m.table.placement[p] = target  # the switch: every CN routes to the new copy
            await run.store.save_table(m.table)
            await run.reached("catalogue")

    async def can_roll_back(self, run: JobRun) -> bool:
        return await before_marker(run, "meta_change")

    async def roll_back(self, run: JobRun) -> None:
        """The old copy stays in force; the new one, which nothing names, is dropped."""
        m = self._move(run)
        try:
            await run.ctx.pools.execute(
                m.target, f"DROP TABLE IF EXISTS {m.table.physical_name(m.partition)}"
            )
        except Exception as exc:  # noqa: BLE001 - a DN gone: its stray copy is named nowhere
            log.warning("job %s: the partial copy on DN %s stays: %s", run.job.id, m.target, exc)

    async def unlocked(self, run: JobRun) -> None:
        # No CN writes the old copy any more: each was frozen until it loaded the new placement.
        spec, source = run.job.spec, run.job.detail["source"]
        await run.runner.reload()
        table = run.ctx.catalogue.table(spec["db"], spec["table"])
        if table.placement[spec["partition"]] != source:  # not moved back meanwhile
            name = table.physical_name(spec["partition"])
            await run.retrying(
                f"DN {source}",
                lambda: run.ctx.pools.execute(source, f"DROP TABLE IF EXISTS {name}"),
            )
        await run.reached("drop_old")

    def result(self, job: Job) -> int | None:
        return job.result.get("meta_change_tso")


def _meta_change(ctx: CnContext, m: Move) -> dict[str, Any]:
    """The MetaChange marker's content: the topology before and after the switch."""
    cat = ctx.catalogue
    before = topology(ctx)
    after_tables = copy.deepcopy(cat.tables)
    after_tables[(m.table.db.lower(), m.table.name.lower())].placement[m.partition] = m.target
    saved, cat.tables = cat.tables, after_tables
    after = topology(ctx)
    cat.tables = saved
    return {
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
        ],
    }


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


async def _copy_checked(ctx: CnContext, m: Move) -> None:
    """Copy the partition unless the target already holds the same rows (a copy finished
    before a crash: the partition has been frozen since, so equal checksums mean done)."""
    name = m.table.physical_name(m.partition)
    try:
        ((_, target_sum),) = await ctx.pools.execute(m.target, f"CHECKSUM TABLE {name}")
    except pymysql.err.MySQLError:  # no such database (yet): copy it
        target_sum = None
    if target_sum is not None:
        ((_, source_sum),) = await ctx.pools.execute(m.source, f"CHECKSUM TABLE {name}")
        if source_sum == target_sum:
            return
    await _copy_table(ctx, name, m.source, m.target)


async def _copy_table(ctx: CnContext, name: str, source: int, target: int) -> None:
    """Create `name` on `target` like on `source` and copy its rows. The copy is not binlogged
    (sql_log_bin=0): these rows are not new logical changes and must not reach the global binlog."""
    ((_, create),) = await ctx.pools.execute(source, f"SHOW CREATE TABLE {name}")
    db = name.split(".")[0]
    async with ctx.pools.connection(target) as dst, dst.cursor() as out:
        await out.execute(f"USE {db}")
        await out.execute(create.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
        await out.execute(f"SHOW CREATE TABLE {name}")
        ((_, there),) = await out.fetchall()
        if _AUTO_INCREMENT.sub("", there) != _AUTO_INCREMENT.sub("", create):
            # A stray copy from before an ALTER (a move rolled back while this DN was gone):
            # the source's rows would not fit it, and the move would fail on every retry.
            await out.execute(f"DROP TABLE {name}")
            await out.execute(create)
        await out.execute("SET SESSION sql_log_bin = 0")
        try:
            await out.execute(f"DELETE FROM {name}")
            async with ctx.pools.connection(source) as src, src.cursor() as cur:
                await cur.execute(f"SELECT * FROM {name}")
                columns = ", ".join(sql_identifier(d[0]) for d in cur.description)
                while rows := await cur.fetchmany(COPY_BATCH):
                    values = ", ".join("(" + ", ".join(literal(v) for v in r) + ")" for r in rows)
                    await out.execute(f"INSERT INTO {name} ({columns}) VALUES {values}")
        finally:
            await out.execute("SET SESSION sql_log_bin = 1")
