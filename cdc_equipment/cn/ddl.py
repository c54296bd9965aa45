"""Logical DDL as a job (`jobs.py`): freeze the table on every CN, run the DDL on every
physical shard, save the catalogue, write a DDL record marker (a TSO transaction on every DN)
with the logical DDL text and the new logical schema, thaw.

Supported: CREATE TABLE, DROP TABLE, ALTER TABLE (ADD/DROP/MODIFY COLUMN, ADD/DROP INDEX, ...
anything that keeps the shard key), TRUNCATE TABLE.

A shard's DDL is checked before it is run: its SHOW CREATE TABLE is compared with the one before
the job (run it) and after the first shard's (done). A shard that refuses the DDL, or a DN
unreachable for `change_timeout_ms`, rolls the job back: the shards already changed are brought
back to the definition before (a CREATE dropped; an ALTER rebuilt from the definition before,
its rows copied unlogged). Once every shard has it, the job only goes forward. DROP and TRUNCATE
cannot be undone: they roll back only while no shard has run them.
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
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.markers import write_ddl_record
from cdc.cn_protocol.sql_text import DdlTarget, parse_ddl
from cdc.sql_literal import sql_identifier
from cdc_equipment.cn.context import CnContext
from cdc_equipment.cn.jobs import UNREACHABLE, JobFailed, JobRun, errno, marker_once

DEFAULT_PARTITIONS = 8
_AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=\d+")
_NAME = re.compile(r"^CREATE TABLE `[^`]+`")


def ddl_spec(
    sql: str,
    *,
    default_db: str | None = None,
    shard_key: str | None = None,
    partitions: int = DEFAULT_PARTITIONS,
    broadcast: bool = False,
) -> dict[str, Any]:
    """What `cdc cn ddl` asks for: the job's spec (a command run again with the same one
    resumes the job)."""
    return {
        "sql": sql,
        "db": default_db,
        "shard_key": shard_key,
        "partitions": partitions,
        "broadcast": broadcast,
    }


def gate_keys(table: LogicalTable) -> set[tuple[str, str, int]]:
    if table.is_broadcast:
        return {(table.db, table.name, -1)}
    return {(table.db, table.name, p) for p in range(table.partitions)}


def _table(detail: dict[str, Any]) -> LogicalTable:
    t = detail["table"]
    return LogicalTable(t["db"], t["name"], t["kind"], t["shard_key"], list(t["placement"]))


def _shards(ctx: CnContext, table: LogicalTable) -> list[tuple[int, int | None]]:
    if table.is_broadcast:
        return [(dn, None) for dn in ctx.catalogue.dns]
    return [(dn, p) for p, dn in enumerate(table.placement)]


class DdlJob:
    kind = "ddl"
    steps = ("freeze", "shards", "catalogue", "record", "thaw")

    def what(self, spec: dict[str, Any]) -> str:
        target = parse_ddl(spec["sql"], spec["db"])
        return f"DDL on {target.db}.{target.table}"

    def _target(self, run: JobRun) -> DdlTarget:
        return parse_ddl(run.job.spec["sql"], run.job.spec["db"])

    async def plan(self, run: JobRun) -> dict[str, Any] | None:
        spec, cat = run.job.spec, run.ctx.catalogue
        target = self._target(run)
        exists = cat.has(target.db, target.table)
        if target.verb == "CREATE":
            if exists:
                if target.if_clause:
                    return None
                raise CatalogueError(f"logical table {target.db}.{target.table} already exists")
            if not spec["broadcast"] and not spec["shard_key"]:
                raise CatalogueError(
                    f"CREATE TABLE {target.db}.{target.table}: give shard_key=... (partitioned) "
                    "or broadcast=True"
                )
            dns = cat.dns
            table = LogicalTable(
                target.db,
                target.table,
                BROADCAST if spec["broadcast"] else PARTITIONED,
                None if spec["broadcast"] else spec["shard_key"].lower(),
                [] if spec["broadcast"] else [dns[i % len(dns)] for i in range(spec["partitions"])],
            )
        elif not exists:
            if target.if_clause:
                return None
            raise CatalogueError(f"unknown logical table {target.db}.{target.table}")
        else:
            table = cat.table(target.db, target.table)
        # The target catalogue entry: where the shards are (a CREATE's placement is decided here).
        return {
            "table": {
                "db": table.db,
                "name": table.name,
                "kind": table.kind,
                "shard_key": table.shard_key,
                "placement": table.placement,
            }
        }

    async def locked(self, run: JobRun) -> None:
        job = run.job
        table, target = _table(job.detail), self._target(run)
        # No DML through any CN between the first shard's DDL and the DDL record: otherwise a
        # row written to an already-altered shard would reach the global binlog before the
        # logical DDL (at the record's TSO) with a column set the downstream does not have yet.
        await run.freeze(gate_keys(table))
        if not job.done("shards"):
            await self._run_on_shards(run, table, target)
            await run.reached("shards")
        if not job.done("catalogue"):
            await self._save_catalogue(run, table, target)
            await run.reached("catalogue")
        if not job.done("record"):
            tso = await marker_once(run, "ddl", lambda tx: self._record(run, table, tx))
            job.detail["result"] = {"tso": tso}
            run.progress(f"ran on every shard; DDL record at TSO {tso}")
            await run.reached("record")

    async def _record(self, run: JobRun, table: LogicalTable, tx) -> int:
        cat, sql = run.ctx.catalogue, run.job.spec["sql"]
        if not cat.has(table.db, table.name):
            return await write_ddl_record(run.ctx, table.db, table.name, sql, None, tx)
        saved = cat.table(table.db, table.name)
        # MergeSource renames this table's physical shards from the record's TSO on.
        new_schema = {**saved.schema, "topology": saved.to_json(cat.dns)}
        return await write_ddl_record(run.ctx, table.db, table.name, sql, new_schema, tx)

    async def _save_catalogue(self, run: JobRun, table: LogicalTable, target: DdlTarget) -> None:
        cat, store = run.ctx.catalogue, run.store
        if target.verb == "DROP":
            if cat.has(table.db, table.name):
                cat.drop(table.db, table.name)
            await store.delete_table(table.db, table.name)
            return
        table.schema = await logical_schema(run.ctx, table)
        cat.put(table)
        await store.save_table(table)

    # -- the shards ------------------------------------------------------------------------------
    async def _definition(self, run: JobRun, dn: int, table: LogicalTable, p) -> str | None:
        """The shard's SHOW CREATE TABLE with what differs between shards taken out (its name,
        AUTO_INCREMENT); None if it does not exist."""
        try:
            ((_, create),) = await run.ctx.pools.execute(
                dn, f"SHOW CREATE TABLE {table.physical_name(p)}"
            )
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] in (1146, 1049):  # no such table / database
                return None
            raise
        return _AUTO_INCREMENT.sub("", _NAME.sub("CREATE TABLE `t`", create, count=1))

    async def _run_on_shards(self, run: JobRun, table: LogicalTable, target: DdlTarget) -> None:
        ctx, job, sql = run.ctx, run.job, run.job.spec["sql"]
        shards = _shards(ctx, table)
        if target.verb == "CREATE":
            for dn in sorted({dn for dn, _ in shards}):
                await run.retrying(
                    f"DN {dn}",
                    lambda dn=dn: ctx.pools.execute(
                        dn,
                        f"CREATE DATABASE IF NOT EXISTS `{physical_db(table.db)}` "
                        "CHARACTER SET utf8mb4",
                    ),
                )
        # A first run knows every shard is as before; a resumed one checks each shard.
        fresh = "before" not in job.detail
        if fresh:
            dn, p = shards[0]
            job.detail["before"] = await run.retrying(
                f"DN {dn}", lambda: self._definition(run, dn, table, p)
            )
            # From here on a shard may have run the DDL whether or not its definition after is
            # saved yet: a DROP or TRUNCATE can no longer roll back (`can_roll_back`).
            job.detail["started"] = True
            await run.log.save_detail(job)
        before = job.detail["before"]
        tried: set[tuple] = set()  # a DDL retried after a lost connection may have run
        for dn, p in shards:
            name = table.physical_name(p)

            async def one(dn=dn, p=p, name=name) -> bool:
                if not fresh or (dn, p) in tried:
                    now = await self._definition(run, dn, table, p)
                    if target.verb != "TRUNCATE" and now == job.detail.get("after", "absent"):
                        return False  # done before a crash
                    if now != before and "after" not in job.detail:
                        # The first shard, run before a crash that came before its definition
                        # after was saved: that definition is the one every shard must reach.
                        job.detail["after"] = now
                        await run.log.save_detail(job)
                        return False
                    if now != before:
                        raise JobFailed(
                            f"shard {name} on DN {dn} is neither as before the DDL nor as after it"
                        )
                physical = sql[: target.name_start] + name + sql[target.name_end :]
                tried.add((dn, p))
                try:
                    await ctx.pools.execute(dn, physical)
                except pymysql.err.MySQLError as exc:
                    if errno(exc) in UNREACHABLE:
                        raise
                    if "after" not in job.detail:  # the first shard refused: none has run it
                        job.detail.pop("started", None)
                        await run.log.save_detail(job)
                    raise JobFailed(
                        f"the DDL failed on DN {dn} ({name}): {exc.args[-1] if exc.args else exc}"
                    ) from None
                return True

            if await run.retrying(f"DN {dn} ({name})", one):
                if "after" not in job.detail:
                    job.detail["after"] = await self._definition(run, dn, table, p)
                    await run.log.save_detail(job)
                run.point("shard")
        run.progress(f"job {job.id}: the DDL stands on {len(shards)} shard(s)")

    async def can_roll_back(self, run: JobRun) -> bool:
        if run.job.done("shards"):
            return False
        verb = self._target(run).verb
        if verb in ("CREATE", "ALTER"):
            return True
        return "started" not in run.job.detail  # DROP/TRUNCATE: while no shard may have run it

    async def roll_back(self, run: JobRun) -> None:
        """Every shard reachable back to the definition before the job."""
        ctx, job = run.ctx, run.job
        table, verb = _table(job.detail), self._target(run).verb
        if "before" not in job.detail:
            return  # saved before the first shard's DDL: no shard has run it
        before = job.detail["before"]
        for dn, p in _shards(ctx, table):
            try:
                now = await self._definition(run, dn, table, p)
            except (pymysql.err.OperationalError, OSError):
                continue  # a DN gone: nothing ran there since its last answer
            if now == before:
                if verb == "ALTER":  # a rebuild killed between its RENAME and its DROP
                    await ctx.pools.execute(dn, _drop_leftovers(table, p))
                continue
            if verb == "CREATE":
                await ctx.pools.execute(dn, f"DROP TABLE IF EXISTS {table.physical_name(p)}")
            else:
                await _rebuild(ctx, dn, table, p, before)
            run.progress(f"job {job.id}: {table.physical_name(p)} on DN {dn} back as before")

    async def unlocked(self, run: JobRun) -> None:
        return None

    def result(self, job) -> int:
        return job.result["tso"]


async def _rebuild(ctx: CnContext, dn: int, table: LogicalTable, p, before: str) -> None:
    """Undo an ALTER on one shard: a table made by the definition before, the rows copied
    (unlogged: they are no new change), swapped in by one RENAME. Nothing writes the shard
    meanwhile (the table is frozen on every CN)."""
    phys_db, phys = table.physical_db, physical_table(table.name, p)
    tmp, old = _rebuild_names(phys)
    async with ctx.pools.connection(dn) as conn, conn.cursor() as cur:
        await cur.execute(_drop_leftovers(table, p))
        await cur.execute(f"USE `{phys_db}`")
        await cur.execute(_NAME.sub(f"CREATE TABLE `{tmp}`", before, count=1))
        await cur.execute(
            "SELECT a.COLUMN_NAME FROM information_schema.COLUMNS a JOIN "
            "information_schema.COLUMNS b ON a.TABLE_SCHEMA = b.TABLE_SCHEMA AND "
            "a.COLUMN_NAME = b.COLUMN_NAME WHERE a.TABLE_SCHEMA = %s AND a.TABLE_NAME = %s "
            "AND b.TABLE_NAME = %s ORDER BY a.ORDINAL_POSITION",
            (phys_db, tmp, phys),
        )
        columns = ", ".join(sql_identifier(r[0]) for r in await cur.fetchall())
        await cur.execute("SET SESSION sql_log_bin = 0")
        try:
            await cur.execute(f"INSERT INTO `{tmp}` ({columns}) SELECT {columns} FROM `{phys}`")
        finally:
            await cur.execute("SET SESSION sql_log_bin = 1")
        await cur.execute(f"RENAME TABLE `{phys}` TO `{old}`, `{tmp}` TO `{phys}`")
        await cur.execute(f"DROP TABLE `{old}`")


def _rebuild_names(phys: str) -> tuple[str, str]:
    """`_rebuild`'s table being built and the old one it swaps out."""
    return f"{phys}__cdc_rollback", f"{phys}__cdc_old"


def _drop_leftovers(table: LogicalTable, p) -> str:
    tmp, old = _rebuild_names(physical_table(table.name, p))
    return f"DROP TABLE IF EXISTS `{table.physical_db}`.`{tmp}`, `{table.physical_db}`.`{old}`"


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
