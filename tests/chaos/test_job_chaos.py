"""Cluster changes killed at their crash points (cdc_equipment/cn/job_crash_points.py, a row per point): the
process running a logical DDL, an added DN or a partition move SIGKILLs itself at the point,
while transfer, orders and ddl-mix write from other CN processes and the pipeline runs. The
job is finished by a workload CN that notices (the owner's lease ran out) or by the command run
again, which must report it done; no job stays running, nothing stays frozen, the transfer
total is unchanged, and the end-of-run proof (`cdc verify-binlog` with the schema check, a
MariaDB replica `cdc check` equal) passes.

Size: CDC_CHAOS_JOB_POINTS is the number of rows picked at random (CDC_CHAOS_SEED), default 3
(a point of each kind); "all" runs every point of every kind (22 rows).

The crash points are between steps; a kill can land anywhere (issue 33's poison job: between
the job row's INSERT and its plan's UPDATE). So the same changes are also SIGKILLed after a
random delay (`test_changes_killed_at_random_moments_finish`): CDC_CHAOS_JOB_KILLS of them,
default 3 (a DDL, a move, an added DN), timed by CDC_CHAOS_KILL_SEED (printed).
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import time
from collections import Counter

import pytest

from cdc.cn_protocol.catalogue import physical_table
from cdc_equipment.cn import ComputeNode
from cdc_equipment.cn.job_crash_points import points
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from tests.chaos.harness import ACCOUNTS, WORKLOADS, Chaos, running_chaos

SIZE = os.environ.get("CDC_CHAOS_JOB_POINTS", "3")
ROWS = [(kind, point) for kind in ("ddl", "add-dn", "move") for point in points(kind)]
# An added DN's `move` point first: by the last add-dn rows, 8 partitions over 9+ DNs leave none
# to move.
ROWS.insert(ROWS.index(("add-dn", "recorded")), ROWS.pop(ROWS.index(("add-dn", "move"))))
LOAD = {
    "transfer": WORKLOADS["transfer"],
    "orders": WORKLOADS["orders"],
    "ddl-mix": ["--threads", "2"],
}
# The suite's 300 s per test is for the default size; a long run (every point: ~12 min on a
# loaded 2-core machine) gets about a minute per row.
ROW_COUNT = len(ROWS) if SIZE == "all" else int(SIZE)
KILLS = int(os.environ.get("CDC_CHAOS_JOB_KILLS", "3"))
# The random-moment kills' kinds, in turn: a DN added every fourth (each starts one).
KILL_KINDS = ("ddl", "move", "add-dn", "ddl")


@pytest.fixture(scope="module")
def chaos(tmp_path_factory):
    # Every add-dn row (and every fourth random kill) starts a DN: room for all of them.
    spare = (9 if SIZE == "all" else 4) + KILLS // len(KILL_KINDS)
    with running_chaos(tmp_path_factory.mktemp("jobs"), spare_dns=spare) as c:
        yield c


def pick(c: Chaos) -> list[tuple[str, str]]:
    """Every row, or SIZE rows at random: one point of each kind first."""
    if SIZE == "all":
        return list(ROWS)
    kinds = ("ddl", "add-dn", "move")
    rows = [(k, c.rng.choice(points(k))) for k in kinds][: int(SIZE)]
    rest = [r for r in ROWS if r not in rows]
    rows += c.rng.sample(rest, max(0, int(SIZE) - len(rows)))
    return sorted(rows, key=ROWS.index)


class Commands:
    """The command of each row: a DDL that alternately adds and drops a column of the table
    `transfer` writes; an added DN (one more started each time); a move of one of its
    partitions to another DN."""

    def __init__(self, c: Chaos, column: str = "c"):
        self.c = c
        self.column = column  # each test its own columns: every DDL's text is new
        self.ddl_n = 0

    def next(self, kind: str) -> tuple[str, ...]:
        if kind == "ddl":
            n, self.ddl_n = self.ddl_n, self.ddl_n + 1
            col = self.column
            if n % 2 == 0:
                return ("cn", "ddl", f"ALTER TABLE bank.accounts ADD COLUMN {col}{n} INT NULL")
            return ("cn", "ddl", f"ALTER TABLE bank.accounts DROP COLUMN {col}{n - 1}")
        if kind == "add-dn":
            dn = self.c.add_dn()
            return ("cn", "add-dn", "--dn", str(dn))
        partition, target = self._move()
        return ("cn", "move", "bank.accounts", str(partition), "--dn", str(target))

    def _move(self) -> tuple[int, int]:
        db = self.c.cfg.cn.catalogue_database
        with self.c.cluster.gms.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT part, dn_id FROM `{db}`.cn_partition WHERE db = 'bank' AND "
                "tbl = 'accounts' ORDER BY part"
            )
            placement = dict(cur.fetchall())
            cur.execute(f"SELECT dn_id FROM `{db}`.cn_storage ORDER BY seq")
            dns = [r[0] for r in cur.fetchall()]
        partition = self.c.rng.choice(sorted(placement))
        target = self.c.rng.choice([d for d in dns if d != placement[partition]])
        return partition, target


def gms_one(c: Chaos, sql: str):
    with c.cluster.gms.connect() as conn, conn.cursor() as cur:
        cur.execute(sql.format(db=c.cfg.cn.catalogue_database))
        return cur.fetchall()


DONE = {"ddl": "DDL record at TSO", "add-dn": "added: StorageChange", "move": "moved: MetaChange"}


@pytest.mark.timeout(max(300, 60 * ROW_COUNT))
async def test_changes_killed_at_their_crash_points_finish(chaos):
    c = chaos
    began = time.monotonic()
    for name, args in LOAD.items():
        c.spawn(name, ["workload", name, "--duration", "3600", *args])
    await asyncio.sleep(3)  # the workloads have made their tables
    commands = Commands(c)
    outcome: dict[str, int] = {"killed, resumed by the command": 0, "killed, taken over": 0}
    not_reached = []
    for kind, point in pick(c):
        args = commands.next(kind)
        env = {"CDC_CN_JOB_CRASH_AT": f"{kind}:{point}"}
        if point == "shard":
            env["CDC_CN_JOB_CRASH_AFTER"] = "2"
        killed = await asyncio.to_thread(c.cdc_result, *args, env=env)
        if killed.returncode == 0:  # e.g. an added DN with no partition to move
            not_reached.append(f"{kind}:{point}")
            continue
        assert killed.returncode == -9, f"{kind}:{point}: {killed.stdout}{killed.stderr}"
        again = await asyncio.to_thread(c.cdc_result, *args)
        assert again.returncode == 0, f"{kind}:{point} run again: {again.stdout}{again.stderr}"
        assert DONE[kind] in again.stdout, f"{kind}:{point}: {again.stdout}"
        resumed = "resuming" in again.stdout or "taking over job" in again.stdout
        outcome["killed, resumed by the command" if resumed else "killed, taken over"] += 1
        c.assert_pipeline_alive()
    # The proof's `cdc cn recover` finishes the jobs of the workloads it kills (ddl-mix's DDL).
    proof = await c.prove("cluster changes killed at their crash points")
    states = dict(gms_one(c, "SELECT state, COUNT(*) FROM `{db}`.cn_job GROUP BY state"))
    assert set(states) <= {"done", "rolled back"}, states
    assert gms_one(c, "SELECT frozen FROM `{db}`.cn_change")[0][0] == "[]"
    cn = ComputeNode(c.cfg)
    await cn.start(recover=False)
    try:
        workload = TransferWorkload(cn, db="bank", accounts=ACCOUNTS)
        assert await workload.totals() == (ACCOUNTS, workload.expected_total)
    finally:
        await cn.close()
    print(
        f"\nCHAOS JOBS: {sum(outcome.values())} changes SIGKILLed at a crash point "
        f"({', '.join(f'{k} {v}' for k, v in outcome.items())}; not reached: "
        f"{', '.join(not_reached) or 'none'}); jobs {states}; transfer total unchanged; "
        f"{proof}; {time.monotonic() - began:.0f}s"
    )


@pytest.mark.timeout(max(300, 40 * KILLS))
async def test_changes_killed_at_random_moments_finish(chaos):
    """A DDL, a move or an added DN SIGKILLed after a random delay (anywhere, not only at a
    crash point), then run again: it reports the change done, its job is done, nothing stays
    frozen; at the end every shard of the table has one definition, the one the catalogue
    has, each DDL has one DDL record, and every DN holds exactly the partitions placed on it."""
    c = chaos
    seed = int(os.environ.get("CDC_CHAOS_KILL_SEED", time.time()))
    print(f"kill seed {seed} (CDC_CHAOS_KILL_SEED to replay the delays)")
    rng = random.Random(seed)
    began = time.monotonic()
    c.spawn("transfer", ["workload", "transfer", "--duration", "3600", *LOAD["transfer"]])
    while not gms_one(c, "SELECT 1 FROM `{db}`.cn_partition WHERE tbl = 'accounts' LIMIT 1"):
        await asyncio.sleep(0.2)  # run alone, this test waits for transfer's table
    commands = Commands(c, column="r")
    # Most delays count from the job's row (its steps), the rest from the process's start (its
    # start, the plan): drawn up to what the command, or its job, took when last measured.
    whole = {"ddl": 5.0, "move": 5.0, "add-dn": 12.0}
    in_job = {"ddl": 1.0, "move": 1.0, "add-dn": 3.0}
    outcome: Counter[str] = Counter()
    ddls = []
    for i in range(KILLS):
        kind = KILL_KINDS[i % len(KILL_KINDS)]
        args = commands.next(kind)
        (last_job,) = gms_one(c, "SELECT COALESCE(MAX(id), 0) FROM `{db}`.cn_job")[0]
        from_job = rng.random() < 0.85
        delay = rng.uniform(0, (in_job if from_job else whole)[kind])
        start = time.monotonic()
        proc = c.spawn(f"{kind} {i}", [*args])
        while from_job and proc.poll() is None and last_job_of(c, kind, last_job) is None:
            await asyncio.sleep(0.02)
        anchor = time.monotonic()
        try:
            await asyncio.to_thread(proc.wait, delay)
            outcome["ended before the kill"] += 1
            assert proc.returncode == 0, f"{args} (not killed) exited {proc.returncode}"
            whole[kind] = time.monotonic() - start
            if from_job:
                in_job[kind] = time.monotonic() - anchor
            job = last_job_of(c, kind, last_job)
        except subprocess.TimeoutExpired:
            await c.kill(f"{kind} {i}")
            job = last_job_of(c, kind, last_job)
            if job is not None and job[2]:
                outcome["killed after reporting"] += 1
            else:
                again = await asyncio.to_thread(c.cdc_result, *args)
                assert again.returncode == 0, (
                    f"{args} killed after {delay:.2f}s (seed {seed}), run again: "
                    f"{again.stdout}{again.stderr}"
                )
                assert DONE[kind] in again.stdout or "nothing to do" in again.stdout, again.stdout
                outcome["killed before its job" if job is None else "killed, resumed"] += 1
                job = last_job_of(c, kind, last_job)
        assert job is None or job[1] == "done", (args, delay, seed, job)
        assert gms_one(c, "SELECT frozen FROM `{db}`.cn_change")[0][0] == "[]", (args, delay)
        if kind == "ddl" and job is not None:
            ddls.append(args[2])
        c.assert_pipeline_alive()
    await c.stop_workloads()
    await asyncio.to_thread(c.recover)
    states = dict(gms_one(c, "SELECT state, COUNT(*) FROM `{db}`.cn_job GROUP BY state"))
    assert set(states) <= {"done", "rolled back"}, states
    await assert_shards_agree(c, ddls)
    print(
        f"\nCHAOS JOB KILLS: {KILLS} changes SIGKILLed at a random moment "
        f"({', '.join(f'{k} {v}' for k, v in sorted(outcome.items()))}); jobs {states}; shards "
        f"and catalogue agree; {len(ddls)} DDL(s), one record each; "
        f"{time.monotonic() - began:.0f}s"
    )


def last_job_of(c: Chaos, kind: str, after: int) -> tuple | None:
    """(id, state, reported) of the first job of `kind` after job `after` (the command's own:
    an added DN's moves come after it), or None."""
    rows = gms_one(
        c,
        f"SELECT id, state, reported FROM `{{db}}`.cn_job WHERE id > {after} AND "
        f"kind = '{kind}' ORDER BY id LIMIT 1",
    )
    return rows[0] if rows else None


async def assert_shards_agree(c: Chaos, ddls: list[str]) -> None:
    cn = ComputeNode(c.cfg)
    await cn.start(recover=False)
    try:
        table = cn.catalogue.table("bank", "accounts")
        columns = [col["name"] for col in table.schema["columns"]]
        for dn in cn.catalogue.dns:
            placed = {
                physical_table(table.name, p) for p, d in enumerate(table.placement) if d == dn
            }
            held = await cn.ctx.pools.execute(
                dn,
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME LIKE 'accounts%%'",
                (table.physical_db,),
            )
            assert {r[0] for r in held} == placed, (dn, held, placed)
            for name in placed:
                shard = await cn.ctx.pools.execute(
                    dn,
                    "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                    (table.physical_db, name),
                )
                assert [r[0] for r in shard] == columns, (dn, name, shard, columns)
        for sql in ddls:
            (((n,),),) = [
                await cn.ctx.pools.execute(
                    cn.catalogue.dns[0],
                    "SELECT COUNT(*) FROM `__cdc__`.`__cdc_ddl_record__` WHERE ddl = %s",
                    (sql,),
                )
            ]
            assert n == 1, (sql, n)
    finally:
        await cn.close()


def test_every_point_has_a_row():
    """The rows are the crash points, as `crash_points.STEPS` are the kill test's."""
    assert len(ROWS) == sum(len(points(k)) for k in ("ddl", "add-dn", "move"))
    assert ("ddl", "shard") in ROWS and ("move", "meta_change") in ROWS
