"""A multi-stream global binlog for real (`[dumper] streams = 2`, docs/streams.md): the
pipeline (`cdc start`) under transfer and orders traffic, one stream's process SIGKILLed on the
way; a MariaDB replica follows both streams with one named (multi-source) connection each and
ends `cdc check` equal; `cdc verify-binlog` checks each stream and their union against the CN's
ground truth; `SHOW BINARY STREAMS` on the main port lists both.

Sizes: CDC_STREAMS_TRAFFIC_S seconds of traffic before and after the kill (default 3)."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pymysql

from cdc.cn_protocol.ground_truth import read as read_ground_truth
from cdc.streams import stream_port
from local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from local_cluster.testing import free_base_port
from tests.chaos.harness import Chaos
from tests.chaos.test_pipeline_kill import _children

TRAFFIC_S = float(os.environ.get("CDC_STREAMS_TRAFFIC_S", "3"))
STREAMS = 2


class StreamsChaos(Chaos):
    def configure(self, cfg) -> None:
        cfg.dumper.streams = STREAMS
        if not getattr(self, "stream_base", 0):
            self.stream_base = free_base_port(STREAMS - 1)
        cfg.dumper.stream_port = self.stream_base

    def attach_replica(self) -> None:
        """One named connection per stream (MariaDB multi-source)."""
        with self.replica.connect() as conn, conn.cursor() as cur:
            for i in range(STREAMS):
                cur.execute(
                    f"CHANGE MASTER 's{i}' TO MASTER_HOST='127.0.0.1', "
                    f"MASTER_PORT={stream_port(self.cfg.dumper, i)}, "
                    f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}', "
                    "MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, MASTER_USE_GTID=no, "
                    "MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1"
                )
            cur.execute("START ALL SLAVES")

    def stream_pids(self) -> list[int]:
        pipeline = self.procs["pipeline"].pid
        return [
            pid
            for pid, cmdline in _children(pipeline)
            if b"dumper.streams.stream_process" in cmdline
        ]


async def tables_created(chaos: Chaos, count: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            truth = read_ground_truth(chaos.cfg.cn.ground_truth_log)
        except OSError:
            truth = []
        if sum(1 for e in truth if e["kind"] == "ddl") >= count:
            return
        assert time.monotonic() < deadline, f"the workloads created no {count} tables"
        await asyncio.sleep(0.2)


def show_binary_streams(cfg) -> list[tuple]:
    conn = pymysql.connect(
        host="127.0.0.1", port=cfg.dumper.port, user=DEFAULT_USER, password=DEFAULT_PASSWORD
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY STREAMS")
            return list(cur.fetchall())
    finally:
        conn.close()


async def test_two_streams_survive_a_killed_stream_and_a_replica_follows_both(tmp_path):
    started = time.monotonic()

    def phase(what: str) -> None:
        print(f"{time.monotonic() - started:6.1f}s {what}")

    chaos = StreamsChaos(tmp_path)
    try:
        phase("cluster up")
        chaos.start_pipeline()
        phase("pipeline serves")
        chaos.attach_replica()
        chaos.start_workload("transfer")
        chaos.start_workload("orders")
        await tables_created(chaos, 5)  # bank.accounts and shop's 4: a kill mid-DDL abandons it
        phase("tables created")
        await asyncio.sleep(TRAFFIC_S)
        (victim, *_) = sorted(chaos.stream_pids())[1:] or chaos.stream_pids()
        os.kill(victim, signal.SIGKILL)
        await asyncio.sleep(TRAFFIC_S)
        deadline = time.monotonic() + 60
        while len(chaos.stream_pids()) < STREAMS:  # the merge starts the stream again
            assert time.monotonic() < deadline, chaos.log_tail()
            await asyncio.sleep(0.5)
        phase("stream killed and back")
        summary = await chaos.prove("a SIGKILL of one stream's process")
        print(summary)
        phase("proved")
        rows = show_binary_streams(chaos.cfg)
        assert [r[0] for r in rows] == ["stream0", "stream1"]
        assert [r[1] for r in rows] == [stream_port(chaos.cfg.dumper, i) for i in range(STREAMS)]
        assert all(r[2] == "binlog.000001" and r[3] > 4 and r[4] for r in rows), rows
    finally:
        chaos.close()
