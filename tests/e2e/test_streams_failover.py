"""HA of a multi-stream binlog (`[dumper] streams = 2` with two dumper peers, docs/streams.md
"HA followers"), end to end on the mariadb flavour's cluster of tests/e2e/test_mariadb_flavor.py:
dumper 1 leads both streams, dumper 2 keeps a copy of each and serves it read-only on its own
stream ports; a real MariaDB replica follows stream 1 (where `bank` is pinned) by GTID
(MASTER_USE_GTID=slave_pos). Under transfer traffic the leader dumper and every process of it
(merge, streams, servers) is SIGKILLed; dumper 2 takes over both streams; the replica,
re-pointed at dumper 2's stream 1 port with slave_pos and nothing else, continues without a
replication error to the stream's end (its gtid_slave_pos is the stream's gtid_binlog_pos: no
transaction missing, none twice) and ends `cdc check` equal; every committed transaction is in
dumper 2's streams, none twice in a stream (against the CN's ground truth, read from its
files). Dumper 1 then comes back as a follower and each of its stream copies ends
byte-identical to the new leader's (cut back where the new term began, if it held more)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pymysql

from cdc.config import DumperPeer, load
from cdc.streams import stream_dir
from cdc_equipment.checks.downstream import run_check
from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.testing import free_base_port
from tests.chaos.dumpers import Dumpers, copies_identical
from tests.chaos.test_dumper_ha import acknowledging
from tests.e2e.global_binlog import read_global_binlog
from tests.e2e.test_mariadb_flavor import (  # noqa: F401 (fixture)
    DOMAIN,
    balances,
    dumper_gtid_pos,
    follow_by_gtid,
    mariadb_flavor,
)
from tests.e2e.test_pipeline import ACCOUNTS, BALANCE

STREAMS = 2
K = 1  # the stream the replica follows: `bank` is pinned to it


def stream_status(dumpers: Dumpers, dumper: int, stream: int) -> dict:
    """Stream `stream`'s process of dumper `dumper`, as it last wrote its status."""
    path = dumpers.root / f"d{dumper}" / f"pipeline-{dumper}" / f"stream{stream}" / "status.json"
    try:
        status = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return status if status.get("written_at", 0) > time.time() - 3 else {}


def gtid_pos_or_none(port: int) -> str | None:
    """Stream K's gtid_binlog_pos on `port`; None while nothing listens there yet."""
    try:
        pos = dumper_gtid_pos(port, DOMAIN + K)
    except pymysql.err.OperationalError:
        return None
    return pos if pos.startswith(f"{DOMAIN + K}-") else None


def kill_dumper(dumpers: Dumpers, i: int) -> None:
    """SIGKILL dumper `i` and every process it started (a host that dies): its merge, its
    stream processes and their servers, its MergeSources (one session: `Dumpers.start`)."""
    proc = dumpers.procs.pop(i)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


async def test_a_gtid_replica_of_one_stream_survives_the_failover_of_the_streams(
    mariadb_flavor,  # noqa: F811
):
    cfg, directory, replica = mariadb_flavor
    base = free_base_port(2 * (STREAMS + 1))
    cfg.dumper.streams = STREAMS
    cfg.dumper.stream_tables = {"bank": K}
    # Long enough that a loaded machine does not make the leader give up waiting before the
    # kill; short, since the new leader waits that long for dumper 1 to follow again.
    cfg.dumper.ack_wait_ms = 4000
    cfg.dumper.peers = [
        DumperPeer(
            i, port=base + (i - 1) * (STREAMS + 1), binlog_dir=str(directory / f"d{i}" / "binlog")
        )
        for i in (1, 2)
    ]
    config_path = str(directory / "cdc.toml")
    cfg.dump(config_path)
    cfg = load(config_path)

    def port(dumper: int) -> int:  # stream K's port on that dumper
        return cfg.for_dumper(dumper).dumper.port + 1 + K

    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=4)
    dumpers = Dumpers(config_path, directory)
    started = time.monotonic()
    try:
        await workload.setup()
        dumpers.start(1)
        await dumpers.wait(
            lambda: dumpers.role(1) == "leader" and stream_status(dumpers, 1, K), 60, "no leader"
        )
        dumpers.start(2)
        await dumpers.wait(lambda: dumpers.role(2) == "follower", 60, "no follower")
        await run_workload(workload.step, threads=4, duration_s=2)
        first = await asyncio.to_thread(follow_by_gtid, replica, port(1), DOMAIN + K)
        print(f"{time.monotonic() - started:5.1f}s the replica follows stream {K}: {first}")
        stop = asyncio.Event()
        load_task = asyncio.create_task(
            run_workload(workload.step, threads=3, duration_s=60, stop=stop)
        )
        # Dumper 2 acknowledges its copy of stream K: the leader serves the replica only that.
        await dumpers.wait(
            lambda: acknowledging(stream_status(dumpers, 1, K)), 60, "no acknowledgement"
        )
        # Dumper 2 serves its copy of stream K read-only while it follows (mid-transaction
        # never: a copy holds whole transactions).
        await dumpers.wait(lambda: gtid_pos_or_none(port(2)), 60, "dumper 2 serves no copy")
        # For a failure's diagnosis: a gate that gave up waiting for dumper 2 (ack_wait_ms,
        # under load) served the replica past dumper 2's copy, which the takeover then forks.
        gate = stream_status(dumpers, 1, K).get("ha", {})
        print(
            f"{time.monotonic() - started:5.1f}s stream {K}'s gate before the kill: degraded "
            f"{gate.get('ack_gate_degraded')}, gave up {gate.get('ack_gate_gave_up')} time(s)"
        )
        kill_dumper(dumpers, 1)  # the replica's master dies under traffic, with all of it
        killed_at = time.monotonic()
        await dumpers.wait(
            lambda: dumpers.role(2) == "leader" and stream_status(dumpers, 2, K).get("ha"),
            60,
            "dumper 2 did not take over",
        )
        print(
            f"{time.monotonic() - started:5.1f}s took over in {time.monotonic() - killed_at:.1f}s"
        )
        dumpers.start(1)  # comes back as a follower (its copies are compared at the end)
        await asyncio.sleep(1.0)
        stop.set()
        await load_task
        last = await asyncio.to_thread(follow_by_gtid, replica, port(2), DOMAIN + K)
        print(f"{time.monotonic() - started:5.1f}s the replica is at the new leader's end: {last}")
        report = await asyncio.to_thread(run_check, cfg, replica.host, replica.port, "root", "", 60)
        assert report.equal, report.render()

        # Every committed transaction in the new leader's streams, none twice in a stream
        # (`cdc verify-binlog` reads the mysql flavour only: the files are read here).
        d2 = cfg.for_dumper(2).dumper
        written: set[int] = set()
        for i in range(STREAMS):
            tsos = [t.tso for t in read_global_binlog(stream_dir(d2, i))]
            assert len(tsos) == len(set(tsos)), f"stream {i} holds a transaction twice"
            written.update(tsos)
        truth = read_ground_truth(cfg.cn.ground_truth_log)
        assert written == {e["tso"] for e in truth if e["kind"] in ("txn", "ddl")}

        # Dumper 1 follows again: each stream's copy ends the same bytes as the leader's.
        d1 = cfg.for_dumper(1).dumper
        await dumpers.wait(
            lambda: all(
                copies_identical(stream_dir(d1, i), stream_dir(d2, i)) for i in range(STREAMS)
            ),
            60,
            "dumper 1's stream copies differ from the leader's",
        )
        print(f"{time.monotonic() - started:5.1f}s dumper 1's copies are identical")
    finally:
        dumpers.stop()
        await cn.close()
    assert int(last.split("-")[2]) > int(first.split("-")[2])
    assert balances(replica) == (ACCOUNTS, ACCOUNTS * BALANCE)
