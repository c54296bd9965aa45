"""End to end on a cluster of its own: the reference CN runs transfers over 3 DNs while the
pipeline writes the global binlog; the binlog is checked against the CN's ground truth."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess

import pytest

from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster, throwaway_server
from dumper.service import serve
from tests.e2e.global_binlog import Txn, read_global_binlog

ACCOUNTS = 100
BALANCE = 1000
# Traffic seconds of the long phases (transfers; orders + transfers around the scale-out);
# `make test` keeps them short, CDC_E2E_SECONDS=60 runs the 60 s version.
LONG_S = float(os.environ.get("CDC_E2E_SECONDS", "0"))


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    directory = tmp_path_factory.mktemp("e2e")
    cluster = throwaway_cluster(directory / "cluster", dns=3)
    cfg = cluster.config()
    cfg.dumper.binlog_dir = str(directory / "binlog")
    cfg.cn.ground_truth_log = str(directory / "truth.jsonl")
    cfg.pipeline.checkpoint_interval_ms = 200
    cfg.dumper.port = free_base_port(0)
    replica = throwaway_server(directory, server_id=500)
    try:
        yield cfg, directory, replica, cluster
    finally:
        replica.stop()
        cluster.down()


async def run_pipeline_while(cfg, directory, work, after=None):
    """Run the pipeline until `work` is done and the binlog has caught up with the CN; then
    `after()` (consumers of the dumper) while the dumper still serves."""
    service = asyncio.create_task(serve(cfg, directory / "pipeline", heartbeat=True))
    try:
        result = await work()
        await caught_up(cfg, directory, service)
        if after is not None:
            await after()
        return result
    finally:
        service.cancel()
        with pytest.raises(asyncio.CancelledError):
            await service


async def caught_up(cfg, directory, service, timeout_s: float = 120.0) -> None:
    """Until the global binlog holds every transaction and DDL the CN's ground truth says was
    committed (the pipeline's status file names the last written TSO). A fixed sleep here
    failed on a loaded machine."""
    truth = read_ground_truth(cfg.cn.ground_truth_log)
    last = max((r["tso"] for r in truth if r["kind"] in ("txn", "ddl")), default=0)
    status = directory / "pipeline" / "status.json"
    async with asyncio.timeout(timeout_s):
        while True:
            assert not service.done(), service.exception()
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                now = json.loads(status.read_text())
                if now["last_tso"] >= last:
                    return
                if now["low_watermark_tso"] >= last:  # merged; written by the next status
                    await asyncio.sleep(1.0)
                    return
            await asyncio.sleep(0.1)


async def check_replica(cfg, directory, replica):
    """Run the pipeline again and `cdc check` the replica against the logical tables."""
    from cdc_equipment.checks.downstream import run_check

    service = asyncio.create_task(serve(cfg, directory / "pipeline", heartbeat=True))
    try:
        return await asyncio.to_thread(run_check, cfg, replica.host, replica.port, "root", "", 60)
    finally:
        service.cancel()
        with pytest.raises(asyncio.CancelledError):
            await service


def check_transfer_invariant(txns: list[Txn]) -> int:
    """Replay the row changes: after every transaction the total balance is unchanged."""
    balances: dict[int, int] = {}
    checked = 0
    for txn in txns:
        for db, table, kind, rows in txn.changes:
            assert not db.endswith("_p"), f"physical name leaked: {db}.{table}"
            if (db, table) != ("bank", "accounts"):
                continue
            for row in rows:
                if kind == "write":
                    balances[row[0]] = row[1]
                elif kind == "update":
                    before, after = row
                    assert balances[before[0]] == before[1], "before-image disagrees with history"
                    balances[after[0]] = after[1]
                else:
                    balances.pop(row[0])
        if len(balances) == ACCOUNTS:
            assert sum(balances.values()) == ACCOUNTS * BALANCE, f"total changed at TSO {txn.tso}"
            checked += 1
    return checked


async def test_transfers_come_out_once_in_tso_order_with_the_total_unchanged(e2e):
    cfg, directory, replica, cluster = e2e
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)

    async def work():
        await workload.setup()
        return await run_workload(workload.step, threads=8, duration_s=LONG_S or 8)

    consumed = {}

    async def consumers():
        consumed["pmr"] = await asyncio.to_thread(read_with_pmr, cfg.dumper.port)
        consumed["replica"] = await asyncio.to_thread(replicate, replica, cfg.dumper.port)

    try:
        stats = await run_pipeline_while(cfg, directory, work, consumers)
        truth_totals = await workload.totals()
    finally:
        await cn.close()
    assert stats.committed > 100 and stats.failed == 0

    txns = read_global_binlog(directory / "binlog")
    tsos = [t.tso for t in txns]
    assert tsos == sorted(tsos) and len(set(tsos)) == len(tsos), (
        "global binlog is not in strict TSO order"
    )
    truth = {e["tso"]: e for e in read_ground_truth(cfg.cn.ground_truth_log)}
    written = [t for t in txns if t.ddl is None]
    assert all(t.tso in truth for t in written), "a transaction the CN never committed"
    transfers = [t for t in written if any(kind == "update" for _, _, kind, _ in t.changes)]
    assert len(transfers) == stats.committed, "lost or duplicated transfers"
    assert [t.ddl for t in txns if t.ddl] == [  # (after CREATE DATABASE IF NOT EXISTS `bank`)
        "CREATE TABLE IF NOT EXISTS bank.accounts (id INT UNSIGNED NOT NULL PRIMARY KEY, "
        "balance BIGINT NOT NULL, updated_at DATETIME(6) NULL)"
    ]
    assert check_transfer_invariant(txns) >= stats.committed
    # python-mysql-replication over the dumper sees the same transactions, by logical name.
    assert consumed["pmr"] == [(t.tso, len(t.changes)) for t in written if t.changes]
    # A MariaDB replica of the dumper ends with exactly the logical table.
    assert consumed["replica"] == truth_totals
    # An independent reader accepts every event and checksum.
    res = subprocess.run(
        ["mariadb-binlog", "--verify-binlog-checksum", str(directory / "binlog" / "binlog.000001")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr


async def test_restart_continues_without_gap_or_duplicate(e2e):
    cfg, directory, replica, cluster = e2e
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)
    before = read_global_binlog(directory / "binlog")
    # Transfers while the pipeline is down, then more with it up again.
    down = await run_workload(workload.step, threads=4, duration_s=2)

    async def work():
        return await run_workload(workload.step, threads=4, duration_s=3)

    try:
        up = await run_pipeline_while(cfg, directory, work)
    finally:
        await cn.close()
    txns = read_global_binlog(directory / "binlog")
    tsos = [t.tso for t in txns]
    assert tsos == sorted(tsos) and len(set(tsos)) == len(tsos)
    assert tsos[: len(before)] == [t.tso for t in before]
    new_transfers = [t for t in txns[len(before) :] if t.changes]
    assert len(new_transfers) == down.committed + up.committed
    check_transfer_invariant(txns)


def read_with_pmr(port: int) -> list[tuple[int, int]]:
    """(CTS tso, number of row events) per transaction, as python-mysql-replication sees them."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import RowsQueryLogEvent
    from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

    settings = {
        "host": "127.0.0.1",
        "port": port,
        "user": DEFAULT_USER,
        "password": DEFAULT_PASSWORD,
    }
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=991,
        blocking=False,
        resume_stream=True,
        log_file="binlog.000001",
        log_pos=4,
        only_events=[WriteRowsEvent, UpdateRowsEvent, RowsQueryLogEvent],
    )
    out, rows = [], 0
    try:
        for ev in stream:
            if isinstance(ev, RowsQueryLogEvent):
                if rows:
                    out.append((int(ev.query.split("::")[1]), rows))
                rows = 0
            else:
                assert (ev.schema, ev.table) == ("bank", "accounts")
                assert set(ev.rows[0].get("values", ev.rows[0].get("after_values"))) == {
                    "id",
                    "balance",
                    "updated_at",
                }
                rows += 1
    finally:
        stream.close()
    return out


def replicate(replica, port: int) -> tuple[int, int]:
    """Point a MariaDB replica at the dumper, wait until it caught up; (rows, total balance)."""
    import time

    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute(
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='{DEFAULT_USER}', "
            f"MASTER_PASSWORD='{DEFAULT_PASSWORD}', MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, "
            "MASTER_USE_GTID=no, MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1"
        )
        cur.execute("START SLAVE")
        deadline = time.monotonic() + 60
        while True:
            cur.execute("SHOW SLAVE STATUS")
            row = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
            assert row["Last_IO_Error"] == "" and row["Last_SQL_Error"] == "", row
            caught_up = (
                row["Slave_SQL_Running"] == "Yes"
                and row["Relay_Master_Log_File"] == row["Master_Log_File"]
                and row["Exec_Master_Log_Pos"] == row["Read_Master_Log_Pos"]
                and row["Read_Master_Log_Pos"] > 4
            )
            if caught_up:
                break
            assert time.monotonic() < deadline, f"replica did not catch up: {row}"
            time.sleep(0.2)
        cur.execute("SELECT COUNT(*), SUM(balance) FROM bank.accounts")
        count, total = cur.fetchone()
    return int(count), int(total)


async def test_orders_and_scale_out_under_traffic_reach_the_replica_intact(e2e):
    """Many column types, shard-key moves and a new DN with partitions moving to it, all while
    the pipeline runs: the replica attached earlier ends equal to every logical table."""
    from cdc_equipment.cn.workloads.orders import OrdersWorkload

    cfg, directory, replica, cluster = e2e
    cn = ComputeNode(cfg)
    await cn.start()
    transfer = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)
    orders = OrdersWorkload(cn, customers=50, large_rows=2000, large_every=200)

    async def work():
        await orders.setup()
        first = asyncio.gather(
            run_workload(orders.step, threads=3, duration_s=LONG_S or 4),
            run_workload(transfer.step, threads=3, duration_s=LONG_S or 4),
        )
        await asyncio.sleep(1)
        spec = await asyncio.to_thread(cluster.add_dn)  # scale-out in the middle of traffic
        node = next(n for n in cluster.config().dn if n.id == spec.dn_id)
        cfg.dn.append(node)  # the CN shares this config object; the running leader does not
        cn.pools.add_node(node)
        result = await cn.add_dn(spec.dn_id)
        stats = await first
        more = await run_workload(transfer.step, threads=3, duration_s=2)
        return result, stats, more

    try:
        result, stats, more = await run_pipeline_while(cfg, directory, work)
        totals = await transfer.totals()
    finally:
        await cn.close()
    assert result.meta_change_tso and result.moved, "no partition moved to the new DN"
    # A transfer racing the partition switch may abort (the CN reports it; it is not committed,
    # so it must not reach the binlog either): only committed work counts below.
    assert all(s.committed > 0 for s in (*stats, more)), [s.summary("w") for s in (*stats, more)]
    assert totals == (ACCOUNTS, ACCOUNTS * BALANCE)

    # A restart after the scale-out (the new DN now resumes from its checkpoint), then the check.
    report = await check_replica(cfg, directory, replica)
    assert report.equal, report.render()
    assert {(t.db, t.table) for t in report.tables} >= {("bank", "accounts"), ("shop", "orders")}

    txns = read_global_binlog(directory / "binlog")
    tsos = [t.tso for t in txns]
    assert tsos == sorted(tsos) and len(set(tsos)) == len(tsos)
    check_transfer_invariant(txns)


async def test_a_silent_dn_holds_the_merge_is_named_and_nothing_is_lost(e2e):
    """SIGSTOP a DN for longer than the idle timeout: the merge waits, `cdc status` (the status
    file) names the DN; after SIGCONT the stream continues and every transfer is there once."""
    import json
    import signal

    cfg, directory, replica, cluster = e2e
    cfg.pipeline.dn_idle_timeout_ms = 2000
    cn = ComputeNode(cfg)
    await cn.start()
    transfer = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)
    before = read_global_binlog(directory / "binlog")
    status_file = directory / "pipeline" / "status.json"
    seen = {}

    async def work():
        load = asyncio.create_task(run_workload(transfer.step, threads=2, duration_s=7))
        await asyncio.sleep(1.5)
        dn = cluster.dn(2)
        dn.kill(signal.SIGSTOP)
        try:
            await asyncio.sleep(4)
            seen["status"] = json.loads(status_file.read_text())
        finally:
            dn.kill(signal.SIGCONT)
        return await load

    try:
        stats = await run_pipeline_while(cfg, directory, work)
    finally:
        await cn.close()
    problems = seen["status"]["problems"]
    assert any(p.startswith("dn2 ") for p in problems), problems
    assert not any(p.startswith(("dn1 ", "dn3 ")) for p in problems), problems
    txns = read_global_binlog(directory / "binlog")
    tsos = [t.tso for t in txns]
    assert tsos == sorted(tsos) and len(set(tsos)) == len(tsos)
    new = [t for t in txns[len(before) :] if any(db == "bank" for db, *_ in t.changes)]
    assert len(new) == stats.committed > 0
    check_transfer_invariant(txns)


async def test_ddl_during_traffic_and_flush_logs(e2e):
    """ddl-mix (ADD/DROP/MODIFY COLUMN, indexes, CREATE/TRUNCATE/DROP) while DML runs, then a
    FlushLogs marker: each logical DDL once, a new binlog file, and the replica still equal."""
    from cdc_equipment.cn.workloads.ddl_mix import DdlMixWorkload

    cfg, directory, replica, cluster = e2e
    cn = ComputeNode(cfg)
    await cn.start()
    mix = DdlMixWorkload(cn, keys=100, ddl_every_s=0.3)
    files_before = len((directory / "binlog" / "binlog.index").read_text().split())

    async def work():
        await mix.setup()
        stop = asyncio.Event()

        async def enough_ddl() -> None:  # >= 4 s and >= 5 DDLs (a loaded machine is slower)
            await asyncio.sleep(4)
            while mix.ddl_done < 5:
                await asyncio.sleep(0.1)
            stop.set()

        stopper = asyncio.create_task(enough_ddl())
        try:
            stats = await run_workload(mix.step, threads=3, duration_s=60, stop=stop)
        finally:
            stopper.cancel()
        await mix.report()
        await cn.flush_logs()
        return stats

    try:
        stats = await run_pipeline_while(cfg, directory, work)
    finally:
        await cn.close()
    assert stats.committed > 0 and mix.ddl_done >= 5
    # +1: the pipeline starts a new file after a clean stop (as MySQL does); +1: FlushLogs
    assert len((directory / "binlog" / "binlog.index").read_text().split()) == files_before + 2
    txns = read_global_binlog(directory / "binlog")
    ddls = [t for t in txns if t.ddl]
    assert sum("mix.items ADD COLUMN extra" in t.ddl for t in ddls) >= 1
    report = await check_replica(cfg, directory, replica)
    assert report.equal, report.render()
    # Each logical DDL exactly once, at its TSO: the DDL records of the CN's ground truth.
    truth_ddl = sorted(
        e["tso"] for e in read_ground_truth(cfg.cn.ground_truth_log) if e["kind"] == "ddl"
    )
    assert sorted(t.tso for t in ddls) == truth_ddl


async def test_a_spilled_transaction_streams_through_whole(e2e):
    """A transaction larger than `spill_mb` on its DNs: spilled by its MergeSources, handed to
    the leader as files, streamed into the binlog in parts; it comes out whole, once, and the
    replica applies it (the 1 GB version with its memory: `cdc bench big-txn`)."""
    cfg, directory, replica, cluster = e2e
    cfg.pipeline.spill_mb = 1
    cn = ComputeNode(cfg)
    await cn.start()
    rows = 8

    async def work():
        await cn.execute_ddl(
            "CREATE TABLE big.blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL)",
            shard_key="id",
            partitions=3,
        )
        async with cn.transaction() as tx:
            for i in range(rows):
                await tx.execute(
                    f"INSERT INTO big.blobs (id, b) VALUES ({i}, REPEAT(CHAR(65 + {i}), 1 << 20))"
                )
        status = directory / "pipeline" / "status.json"
        for _ in range(600):  # a loaded machine may need more than the usual 1.5 s
            with contextlib.suppress(OSError, ValueError):
                if json.loads(status.read_text())["last_tso"] >= tx.commit_tso:
                    break
            await asyncio.sleep(0.1)
        return tx.commit_tso

    try:
        tso = await run_pipeline_while(cfg, directory, work)
    finally:
        cfg.pipeline.spill_mb = 64
        await cn.close()
    (txn,) = [t for t in read_global_binlog(directory / "binlog") if t.tso == tso]
    written = sorted(row for db, table, kind, got in txn.changes for row in got)
    assert [(i, len(b), b[:1]) for i, b in written] == [
        (i, 1 << 20, bytes([65 + i])) for i in range(rows)
    ]
    report = await check_replica(cfg, directory, replica)
    assert report.equal, report.render()
