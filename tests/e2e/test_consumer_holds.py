"""History kept for whom needs it (issue 42, item 5), end to end on a cluster of its own with
`expire_logs_seconds = 1` and a FlushLogs now and then, so that every finished file is soon
due, and a real MariaDB replica as the consumer (following by GTID):

- named in `[[dumper.consumers]]`, the replica is stopped while files rotate, retention runs and
  the dumper restarts: its file stays (the hold was kept in the data dir), and it resumes by
  GTID with nothing lost (`cdc check` equal);
- with `[dumper] archive_dir` and no hold, its file moves to the archive; it resumes by GTID
  from there, and a dump by file:pos from an archived position reads to the end the bytes of
  the files (archive, then live)."""

from __future__ import annotations

import asyncio

import pymysql
import pytest

from binlog_writer import layout
from cdc.config import DumperConsumer
from cdc.protocol.dump_client import BinlogPosition
from cdc_equipment.checks.downstream import run_check
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from dumper.server.store.binlog_files import BinlogFiles
from tests.chaos.transfer_setup import transfer_cn
from tests.dumper.test_consumer_holds import read_to_end
from tests.e2e.test_mariadb_flavor import (  # noqa: F401 (a fixture)
    balances,
    follow_by_gtid,
    mariadb_flavor,
    stop_replica,
)
from tests.e2e.test_pipeline import ACCOUNTS, BALANCE, run_pipeline_while


@pytest.fixture
def held_cluster(mariadb_flavor):  # noqa: F811 (the imported fixture)
    """The mariadb flavour's cluster and replica (a new replica needs the whole history: the
    tests turn retention on, `expire_logs_seconds = 1`, once it followed)."""
    return mariadb_flavor


def live(directory) -> list[str]:
    return layout.read_index(directory / "binlog", "binlog")


def show_consumers(port: int) -> list[tuple]:
    conn = pymysql.connect(
        host="127.0.0.1", port=port, user=DEFAULT_USER, password=DEFAULT_PASSWORD
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW CONSUMERS")
            return list(cur.fetchall())
    finally:
        conn.close()


def replica_file(replica) -> tuple[str, int]:
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW SLAVE STATUS")
        row = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
    return row["Master_Log_File"], int(row["Read_Master_Log_Pos"])


async def follow_and_check(cfg, replica, port: int) -> None:
    """The replica follows the dumper by GTID to its end; then its tables equal the CN's."""
    await asyncio.to_thread(follow_by_gtid, replica, port)
    report = await asyncio.to_thread(run_check, cfg, replica.host, replica.port, "root", "", 60)
    assert report.equal, report.render()


async def traffic(cn, workload, seconds: float, flushes: int) -> None:
    """Transfers, with FlushLogs between them: finished files, soon due (expire 1 s)."""
    for _ in range(flushes):
        await run_workload(workload.step, threads=3, duration_s=seconds / flushes)
        await cn.flush_logs()


async def wait_until(what, timeout: float, message: str):
    deadline = asyncio.get_running_loop().time() + timeout
    while not (got := await asyncio.to_thread(what)):
        assert asyncio.get_running_loop().time() < deadline, message
        await asyncio.sleep(0.2)
    return got


async def test_a_named_replica_away_keeps_its_files_across_a_restart(held_cluster):
    cfg, directory, replica = held_cluster
    cfg.dumper.consumers = [DumperConsumer("replica", server_id=500)]
    port = cfg.dumper.port
    cn, workload = await transfer_cn(cfg)
    held: list[str] = []
    try:

        async def first():
            await traffic(cn, workload, 2, 2)

        async def follow():
            await asyncio.to_thread(follow_by_gtid, replica, port)
            held.append(replica_file(replica)[0])
            rows = await wait_until(
                lambda: [r for r in show_consumers(port) if r[5] == held[0]], 10, "not seen"
            )
            assert rows[0][0] == "replica" and rows[0][9] == held[0]  # Holds_from
            await asyncio.to_thread(stop_replica, replica)
            await asyncio.sleep(1.5)  # (the holds are saved every second)

        await run_pipeline_while(cfg, directory, first, follow)
        cfg.dumper.expire_logs_seconds = 1  # every finished file soon due
        # Away: the dumper restarts, files rotate, retention purges all it may.

        async def more():
            await traffic(cn, workload, 3, 3)

        async def resume():
            await wait_until(lambda: live(directory)[0] == held[0], 20, f"{live(directory)}")
            (row,) = await asyncio.to_thread(show_consumers, port)
            assert row[4] == "No" and row[9] == held[0] and row[10] == "", row  # away, held
            await follow_and_check(cfg, replica, port)

        await run_pipeline_while(cfg, directory, more, resume)
    finally:
        await cn.close()
    assert balances(replica) == (ACCOUNTS, ACCOUNTS * BALANCE)


def events_from(files: BinlogFiles, start: BinlogPosition, upto: str) -> list[bytes]:
    """The events of the files from `start` to the end of `upto` (no ROTATE, no FDE)."""
    names = files.readable_names()
    out = []
    for name in names[names.index(start.file) : names.index(upto) + 1]:
        first = start.pos if name == start.file else 4
        out += [
            e.data for e in files.events(name, 4) if e.pos >= first and e.type_code not in (4, 15)
        ]
    return out


async def test_a_replica_resumes_from_the_archive(held_cluster):
    cfg, directory, replica = held_cluster
    archive = directory / "archive"
    cfg.dumper.archive_dir = str(archive)
    port = cfg.dumper.port
    cn, workload = await transfer_cn(cfg)
    stopped: list[tuple[str, int]] = []
    try:

        async def first():
            await traffic(cn, workload, 2, 2)

        async def follow():
            await asyncio.to_thread(follow_by_gtid, replica, port)
            stopped.append(replica_file(replica))
            await asyncio.to_thread(stop_replica, replica)

        await run_pipeline_while(cfg, directory, first, follow)
        cfg.dumper.expire_logs_seconds = 1  # every finished file soon due
        name, pos = stopped[0]

        async def more():
            await traffic(cn, workload, 3, 3)

        async def resume():
            await wait_until(lambda: (archive / name).exists(), 20, f"{name} not archived")
            assert name not in live(directory)
            files = BinlogFiles(directory / "binlog", archive=archive)
            last = live(directory)[-1]
            want = events_from(files, BinlogPosition(name, pos), last)
            got = await read_to_end(port, BinlogPosition(name, pos), DEFAULT_USER, DEFAULT_PASSWORD)
            got = [e for e in got if e[4] not in (4, 15)]  # by file:pos; no ROTATE, no FDE
            assert len(want) > 10 and got[: len(want)] == want
            await follow_and_check(cfg, replica, port)  # by GTID, from the archive

        await run_pipeline_while(cfg, directory, more, resume)
    finally:
        await cn.close()
    assert balances(replica) == (ACCOUNTS, ACCOUNTS * BALANCE)
