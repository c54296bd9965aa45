"""Cluster changes as jobs (cdc_equipment/cn/jobs.py): `cdc cn ddl` SIGKILLed at every crash point of a DDL
job, then run again, resumes the same job; a live CN takes over a dead owner's job by itself; a
DDL a shard refuses is rolled back on every shard. Afterwards every shard has one definition,
the catalogue agrees, one DDL record was written, and nothing is frozen."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pymysql
import pytest

from cdc_equipment.cn import CatalogueError, ComputeNode
from cdc_equipment.cn.ddl import DdlJob
from cdc_equipment.cn.job_crash_points import points
from cdc_equipment.cn.jobs import POISONED
from tests.cn.conftest import cli, with_cn

DB = "jobs"
# CDC_TEST_JOB_POINTS: the DDL crash points to run, comma-separated, or "all" (each is two
# `cdc` runs, ~7 s); the chaos test (tests/chaos/test_job_chaos.py) runs every point.
_POINTS = os.environ.get("CDC_TEST_JOB_POINTS", "recorded,shard,record")
POINTS = points("ddl") if _POINTS == "all" else tuple(_POINTS.split(","))


def gms(config):
    g = config.gms
    return pymysql.connect(host=g.host, port=g.port, user=g.user, password=g.password)


def gms_rows(config, sql: str, params=None) -> list[tuple]:
    conn = gms(config)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            rows = list(cur.fetchall())
        conn.commit()
        return rows
    finally:
        conn.close()


def jobs(config) -> list[tuple]:
    db = config.cn.catalogue_database
    return gms_rows(config, f"SELECT id, state, step, reason FROM `{db}`.cn_job ORDER BY id")


def last_detail(config) -> str:
    db = config.cn.catalogue_database
    return gms_rows(config, f"SELECT detail FROM `{db}`.cn_job ORDER BY id DESC LIMIT 1")[0][0]


def frozen(config) -> str:
    db = config.cn.catalogue_database
    return gms_rows(config, f"SELECT frozen FROM `{db}`.cn_change")[0][0]


async def definitions(cn: ComputeNode, table: str) -> set[str]:
    """The distinct definitions of the table's shards (name and AUTO_INCREMENT taken out)."""
    await cn.reload_catalogue()
    t = cn.catalogue.table(DB, table)
    out = set()
    for p, dn in enumerate(t.placement):
        ((_, create),) = await cn.ctx.pools.execute(dn, f"SHOW CREATE TABLE {t.physical_name(p)}")
        out.add(create.split("\n", 1)[1].split(" AUTO_INCREMENT=")[0])
    return out


def ddl_records(config, sql: str) -> int:
    node = config.dn[0]
    conn = pymysql.connect(host=node.host, port=node.port, user=node.user, password=node.password)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM `__cdc__`.`__cdc_ddl_record__` WHERE ddl = %s", (sql,)
            )
            return cur.fetchone()[0]
    finally:
        conn.close()


async def columns_agree(cn: ComputeNode, table: str) -> None:
    (shape,) = await definitions(cn, table)
    logical = [c["name"] for c in cn.catalogue.table(DB, table).schema["columns"]]
    assert all(f"`{c}`" in shape for c in logical), (logical, shape)
    assert ("\n" + shape).count("\n  `") == len(logical), (logical, shape)


@pytest.fixture
def short_lease(cn_config, tmp_path) -> Path:
    """A config whose CNs count as dead 1.5 s after they die (the default is 3 s)."""
    path = tmp_path / "short.toml"
    with_cn(cn_config, lease_ms=1500).dump(path)
    return path


async def test_a_ddl_killed_at_every_point_resumes_when_run_again(cn_config, short_lease):
    """No other CN runs meanwhile: the command run again is the one that resumes the job."""
    async with ComputeNode(cn_config) as node:
        await node.execute_ddl(f"DROP TABLE IF EXISTS {DB}.resume")
        await node.execute_ddl(
            f"CREATE TABLE {DB}.resume (id INT PRIMARY KEY, v INT)", shard_key="id", partitions=4
        )
    began = time.monotonic()
    for i, point in enumerate(POINTS):
        sql = (
            f"ALTER TABLE {DB}.resume ADD COLUMN c{i} INT NULL"
            if i % 2 == 0
            else f"ALTER TABLE {DB}.resume DROP COLUMN c{i - 1}"
        )
        env = {
            **os.environ,
            "CDC_CN_JOB_CRASH_AT": f"ddl:{point}",
            "CDC_CN_JOB_CRASH_AFTER": "2" if point == "shard" else "1",
        }
        killed = cli("cn", "ddl", sql, "--config", str(short_lease), env=env)
        assert killed.returncode == -9, f"{point}: not killed: {killed.stdout}{killed.stderr}"
        # The row the killed process left names its target: a taker can run it (a row
        # written before its plan failed every takeover with a KeyError, for ever).
        assert '"table"' in last_detail(cn_config), (point, last_detail(cn_config))
        again = cli("cn", "ddl", sql, "--config", str(short_lease))
        assert again.returncode == 0, f"{point}: {again.stdout}{again.stderr}"
        assert "DDL record at TSO" in again.stdout, again.stdout
        last = jobs(cn_config)[-1]
        assert last[1] == "done", (point, last)
        assert sum(1 for j in jobs(cn_config) if j[1] == "running") == 0
        assert ddl_records(cn_config, sql) == 1, f"{point}: DDL record written twice?"
        assert frozen(cn_config) == "[]", point
        assert f"resuming DDL on {DB}.resume" in again.stdout, again.stdout
        async with ComputeNode(cn_config) as node:
            await columns_agree(node, "resume")
    print(f"{len(POINTS)} DDL crash points, killed and resumed in {time.monotonic() - began:.1f}s")


async def test_a_live_cn_takes_over_a_dead_owners_ddl(cn_config, short_lease, cn):
    path = short_lease
    await cn.execute_ddl(f"DROP TABLE IF EXISTS {DB}.takeover")
    await cn.execute_ddl(
        f"CREATE TABLE {DB}.takeover (id INT PRIMARY KEY, v INT)", shard_key="id", partitions=4
    )
    sql = f"ALTER TABLE {DB}.takeover ADD COLUMN w INT NULL"
    env = {**os.environ, "CDC_CN_JOB_CRASH_AT": "ddl:shard", "CDC_CN_JOB_CRASH_AFTER": "2"}
    killed = await asyncio.to_thread(cli, "cn", "ddl", sql, "--config", str(path), env=env)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    # `cn` (alive) sees the dead owner once its lease has run out, and finishes the job.
    deadline = time.monotonic() + 30
    while jobs(cn_config)[-1][1] == "running":
        assert time.monotonic() < deadline, jobs(cn_config)[-1]
        await asyncio.sleep(0.2)
    assert jobs(cn_config)[-1][1] == "done", jobs(cn_config)[-1]
    assert frozen(cn_config) == "[]"
    assert ddl_records(cn_config, sql) == 1
    await columns_agree(cn, "takeover")
    listed = await asyncio.to_thread(cli, "cn", "jobs", "--config", str(path))
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if f"DDL on {DB}.takeover" in x)
    assert " done " in line and "thaw (5/5)" in line, listed.stdout
    # Run again, the command reports the job the other CN finished rather than a second one.
    again = await asyncio.to_thread(cli, "cn", "ddl", sql, "--config", str(path))
    assert again.returncode == 0 and "DDL record at TSO" in again.stdout, (
        again.stdout + again.stderr
    )
    assert ddl_records(cn_config, sql) == 1


async def test_a_ddl_a_shard_refuses_is_rolled_back_everywhere(cn_config, cn_config_file, cn):
    await cn.execute_ddl(f"DROP TABLE IF EXISTS {DB}.refused")
    await cn.execute_ddl(
        f"CREATE TABLE {DB}.refused (id INT PRIMARY KEY, v INT)", shard_key="id", partitions=4
    )
    t = cn.catalogue.table(DB, "refused")
    ids = {}
    for i in range(1, 200):  # one row with v = 7 in partition 0, two in partition 3
        ids.setdefault(t.partition_for(i), []).append(i)
    rows = [(ids[0][0], 7), (ids[3][0], 7), (ids[3][1], 7), (ids[1][0], 1)]
    async with cn.transaction() as tx:
        for r in rows:
            await tx.execute(f"INSERT INTO {DB}.refused (id, v) VALUES (%s, %s)", r)
    before = await definitions(cn, "refused")
    with pytest.raises(CatalogueError, match="rolled back: the DDL failed on DN"):
        await cn.execute_ddl(f"ALTER TABLE {DB}.refused ADD UNIQUE INDEX uv (v)")
    assert await definitions(cn, "refused") == before
    assert jobs(cn_config)[-1][1] == "rolled back"
    assert "Duplicate entry" in jobs(cn_config)[-1][3]
    listed = cli("cn", "jobs", "--config", str(cn_config_file))
    assert "rolled back" in listed.stdout and "reason: the DDL failed on DN" in listed.stdout
    assert frozen(cn_config) == "[]"
    async with cn.transaction() as tx:
        got = await tx.execute(f"SELECT id, v FROM {DB}.refused ORDER BY id")
    assert sorted(tuple(r) for r in got.rows) == sorted(rows)


async def test_a_job_whose_takeover_always_fails_is_reported_and_can_be_rolled_back(
    cn_config, short_lease, monkeypatch
):
    """Issue 33's poison job: every takeover fails with a bug's error, and every later change
    waits for it. `cdc cn recover` says so and exits non-zero after `POISONED` attempts instead
    of retrying for ever, `cdc cn jobs` shows the failures, `cdc cn jobs --roll-back` ends it."""
    db = cn_config.cn.catalogue_database
    async with ComputeNode(cn_config) as node:
        await node.execute_ddl(f"DROP TABLE IF EXISTS {DB}.poison")
        await node.execute_ddl(
            f"CREATE TABLE {DB}.poison (id INT PRIMARY KEY, v INT)", shard_key="id", partitions=4
        )
        before = await definitions(node, "poison")
    # The row issue 33's kill left (no plan: KeyError 'table'), its owner long dead.
    sql = f"ALTER TABLE {DB}.poison ADD COLUMN p INT NULL"
    spec = '{"broadcast": false, "db": null, "partitions": 8, "shard_key": null, "sql": "%s"}'
    steps = '["freeze", "shards", "catalogue", "record", "thaw"]'
    gms_rows(
        cn_config,
        f"INSERT INTO `{db}`.cn_job (kind, what, spec, steps, step, detail, state, owner, "
        "reason, result, created_at, updated_at) VALUES ('ddl', 'DDL on jobs.poison', %s, %s, "
        "'', '{}', 'running', 4242, '', '{}', NOW(6), NOW(6))",
        (spec % sql, steps),
    )
    began = time.monotonic()
    recover = cli("cn", "recover", "--config", str(short_lease))
    took = time.monotonic() - began
    assert recover.returncode == 1, recover.stdout + recover.stderr
    assert "cannot be taken over" in recover.stdout and "KeyError" in recover.stdout, recover.stdout
    listed = cli("cn", "jobs", "--config", str(short_lease))
    assert "attempt(s) in a row failed" in listed.stdout, listed.stdout
    gms_rows(
        cn_config,
        f"UPDATE `{db}`.cn_job SET state = 'rolled back', reported = 1 WHERE state = 'running'",
    )

    # A job killed after its freeze whose shards' step is a bug: the operator rolls it back.
    env = {**os.environ, "CDC_CN_JOB_CRASH_AT": "ddl:freeze"}
    killed = cli("cn", "ddl", sql, "--config", str(short_lease), env=env)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    job_id = jobs(cn_config)[-1][0]

    async def a_bug(*args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(DdlJob, "_run_on_shards", a_bug)
    node = ComputeNode(with_cn(cn_config, lease_ms=1500))
    await node.start(recover=False)
    try:
        _, stuck = await node.jobs.finish_dead_owners_jobs()
    finally:
        await node.close()
    monkeypatch.undo()
    assert [j.id for j in stuck] == [job_id], stuck
    assert stuck[0].failures >= POISONED and "RuntimeError: a bug" in stuck[0].reason, stuck
    rolled = cli("cn", "jobs", "--roll-back", str(job_id), "--config", str(short_lease))
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert f"job {job_id} (DDL on {DB}.poison): rolled back" in rolled.stdout, rolled.stdout
    assert jobs(cn_config)[-1][1] == "rolled back" and frozen(cn_config) == "[]"
    async with ComputeNode(cn_config) as node:
        assert await definitions(node, "poison") == before
    again = cli("cn", "jobs", "--roll-back", str(job_id), "--config", str(short_lease))
    assert again.returncode == 1 and "not running" in again.stderr, again.stdout + again.stderr
    print(f"a poison job: `cdc cn recover` gave up after {took:.1f}s")


async def test_a_move_over_a_stray_copy_of_an_older_definition(cn_config, cn):
    """A move rolled back while its target DN was gone leaves its copy there; after an ALTER,
    the next move to that DN copies over it (the source's rows did not fit it: every retry of
    the move failed, and every later change waited)."""
    await cn.execute_ddl(f"DROP TABLE IF EXISTS {DB}.stray")
    await cn.execute_ddl(
        f"CREATE TABLE {DB}.stray (id INT PRIMARY KEY, v INT)", shard_key="id", partitions=4
    )
    t = cn.catalogue.table(DB, "stray")
    target = next(dn for dn in cn.catalogue.dns if dn != t.placement[0])
    await cn.ctx.pools.execute(target, f"CREATE TABLE {t.physical_name(0)} (id INT PRIMARY KEY)")
    rows = [(i, i * 10) for i in range(1, 40)]
    async with cn.transaction() as tx:
        for r in rows:
            await tx.execute(f"INSERT INTO {DB}.stray (id, v) VALUES (%s, %s)", r)
    assert await cn.move_partition(DB, "stray", 0, target) is not None
    assert cn.catalogue.table(DB, "stray").placement[0] == target
    async with cn.transaction() as tx:
        got = await tx.execute(f"SELECT id, v FROM {DB}.stray ORDER BY id")
    assert sorted(tuple(r) for r in got.rows) == rows
    assert jobs(cn_config)[-1][1] == "done" and frozen(cn_config) == "[]"
