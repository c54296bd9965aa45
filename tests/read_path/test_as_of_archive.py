"""Reads as of points in archived files (issue 42 item 5, docs/retention.md "The archive"), on a
real pipeline of its own (`snap`'s, with `[dumper] archive_dir`): the same point named by
file:pos, TSO, GTID and TIMESTAMP is read before its file is purged into the archive and again
after, with the file archived (the reconciliation scan crossing from the archive into the live
files): the same position, the same rows. Pruned from the archive, a point before it is 9006
naming the archive's oldest readable point."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path

import pymysql
import pytest

from cdc_equipment.cn import ComputeNode
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from history import RetainedFiles
from tests.read_path.conftest import ACCOUNTS, BALANCE, running_snap
from tests.read_path.test_as_of import _cn, _ids, _raw, _read_as_of, _served

pytestmark = [pytest.mark.timeout(600)]

NOTES = "shop.arch_notes"


@pytest.fixture(scope="module")
def arch(tmp_path_factory):
    with running_snap(tmp_path_factory.mktemp("asof-archive"), archive=True) as snap:
        yield snap


def _flush_logs(cfg) -> None:
    async def go() -> None:
        cn = ComputeNode(cfg)
        await cn.start()
        try:
            await cn.flush_logs()
        finally:
            await cn.close()

    asyncio.run(asyncio.wait_for(go(), 60))


def _admin(snap) -> pymysql.Connection:
    return pymysql.connect(
        host="127.0.0.1",
        port=snap.config.dumper.port,
        user=DEFAULT_USER,
        password=DEFAULT_PASSWORD,
        autocommit=True,
    )


def _live(snap) -> list[str]:
    return [r[0] for r in _raw(snap.connect(), "SHOW BINARY LOGS")]


def _purged_past(snap, file: str) -> None:
    """PURGE BINARY LOGS TO the active file until `file` is no longer live (a new active file
    is held until it has a whole transaction: the transfers write one soon)."""
    deadline = time.monotonic() + 60
    conn = _admin(snap)
    try:
        while file in _live(snap):
            assert time.monotonic() < deadline, _live(snap)
            with conn.cursor() as cur:
                cur.execute(f"PURGE BINARY LOGS TO '{sorted(_live(snap))[-1]}'")
            time.sleep(0.5)
    finally:
        conn.close()


def test_reads_as_of_archived_points_equal_the_reads_before(arch):
    cfg = arch.config
    binlog, archive = Path(cfg.dumper.binlog_dir), Path(cfg.dumper.archive_dir)
    _cn(
        cfg,
        f"INSERT INTO {NOTES} (id, n, s) VALUES "
        + ", ".join(f"({i}, {i * 10}, 's{i}')" for i in range(40)),
        ddl=(f"CREATE TABLE {NOTES} (id BIGINT NOT NULL PRIMARY KEY, n INT, s VARCHAR(16))",),
    )
    _served(arch, f"SELECT COUNT(*) FROM {NOTES}", ((40,),))
    _flush_logs(cfg)  # the point in a second file: the first can be pruned from the archive
    time.sleep(1)  # transfers: the point is among them
    point = RetainedFiles(binlog).end_point()  # one boundary, all four names
    assert point.file != "binlog.000001", point
    ms = point.tso >> 22
    when = dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")
    forms = [
        f"'{point.file}':{point.pos}",
        f"TSO {point.tso}",
        f"GTID '{point.gtid}'",
        f"TIMESTAMP '{when}'",  # after its millisecond's last transaction: at or after point
    ]
    _cn(
        cfg,
        f"UPDATE {NOTES} SET n = -n WHERE id IN {_ids(0, 20)}",
        f"DELETE FROM {NOTES} WHERE id IN {_ids(30, 40)}",
    )
    _flush_logs(cfg)  # the point's file finished: it can be purged
    _cn(cfg, f"INSERT INTO {NOTES} (id, n, s) VALUES (100, 1, 'later')")
    _served(arch, f"SELECT COUNT(*) FROM {NOTES}", ((31,),))
    tables = ["bank.accounts", NOTES]
    before = {form: _read_as_of(arch, form, tables) for form in forms}
    for form in forms[:3]:  # the same boundary
        assert before[form][0] == (point.file, point.pos), form
    position, rows = before[forms[0]]
    assert len(rows[NOTES]) == 40 and all(int(r[1]) >= 0 for r in rows[NOTES])
    assert sum(int(r[1]) for r in rows["bank.accounts"]) == ACCOUNTS * BALANCE

    _purged_past(arch, point.file)
    assert (archive / point.file).exists() and not (binlog / point.file).exists()
    listed = {r[0]: r[3] for r in _raw(arch.connect(), "SHOW ALL BINARY LOGS")}
    assert listed[point.file] == "Yes", listed
    after = {form: _read_as_of(arch, form, tables) for form in forms}
    for form in forms:
        assert after[form] == before[form], form
    conn = arch.connect()
    try:
        with conn.cursor() as cur:  # the GTIDs as of the archived point, not the end's
            cur.execute(f"START TRANSACTION READ ONLY AS OF {forms[0]}")
            cur.execute("SELECT @@gtid_executed")
            uuid, _, gno = point.gtid.rpartition(":")
            assert cur.fetchone()[0] == f"{uuid}:1-{gno}"
            cur.execute("COMMIT")
    finally:
        conn.close()
    print(
        "\n".join(
            f"{form}: {pos[0]}:{pos[1]}, {', '.join(f'{t} {len(r)} rows' for t, r in got.items())}"
            for form, (pos, got) in after.items()
        )
    )

    # The operator prunes the archive's oldest file: a point before what is left is 9006,
    # naming the archive's oldest readable point.
    oldest = sorted(p.name for p in archive.iterdir() if p.name.startswith("binlog."))
    assert len(oldest) >= 2, oldest
    (archive / oldest[0]).unlink()
    conn = arch.connect()
    try:
        with conn.cursor() as cur:
            for sql, says in (
                ("SELECT * FROM bank.accounts AS OF TSO 1", "before the oldest retained file"),
                (f"SELECT * FROM bank.accounts AS OF '{oldest[0]}':4", "was purged"),
            ):
                with pytest.raises(pymysql.err.MySQLError) as err:
                    cur.execute(sql)
                code, message = err.value.args
                assert code == 9006, err.value.args
                assert says in message and f"{oldest[1]} (archived in {archive})" in message
                assert f"oldest readable point is '{oldest[1]}':" in message, message
            # The point itself still reads, from the archive.
            cur.execute(f"SELECT COUNT(*) FROM {NOTES} AS OF {forms[0]}")
            assert cur.fetchall() == ((40,),)
    finally:
        conn.close()
