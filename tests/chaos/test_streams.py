"""A multi-stream global binlog for real (`[dumper] streams = 2`, docs/streams.md): the
pipeline (`cdc start`) under transfer, orders and ddl-mix traffic (the DDL on tables of both
streams: `mix.scratch` is pinned to stream 0, `mix.items` hashes to stream 1), a scale-out
(`cdc cn add-dn`: a DN joins the merge while the streams run) and a SIGKILL of each stream's
process, one after the other; a MariaDB replica follows both streams with one named
(multi-source) connection each and ends `cdc check` equal; `cdc verify-binlog` checks each
stream and their union against the CN's ground truth; `SHOW BINARY STREAMS` on the main port
lists both; and a GTID consumer of a killed stream (python-mysql-replication with
auto-position, as it stood before the kill) goes on after the stream came back with the next
GTID, gapless, to the end.

Sizes: CDC_STREAMS_TRAFFIC_S seconds of traffic between the steps (default 3),
CDC_STREAMS_ADD_DNS DNs added (default 1)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time

import pymysql

from cdc.streams import stream_dir, stream_port
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port
from tests.chaos.harness import WORKLOADS, Chaos
from tests.chaos.test_pipeline_kill import _children

TRAFFIC_S = float(os.environ.get("CDC_STREAMS_TRAFFIC_S", "3"))
ADD_DNS = int(os.environ.get("CDC_STREAMS_ADD_DNS", "1"))
STREAMS = 2
# ddl-mix's two tables hash to stream 1 (CRC32): a pin puts its scratch table's CREATE,
# TRUNCATE and DROP on stream 0, so both streams carry DDL (and the pins are exercised).
PINS = {"mix.scratch": 0}
# The harness's workloads with fewer threads, and ddl-mix: the proof's time grows with the
# traffic (verify-binlog and cdc check read all of it), and the point is the kinds of change.
LOAD = {
    "transfer": ["--threads", "2", *WORKLOADS["transfer"][2:]],
    "orders": ["--threads", "1", *WORKLOADS["orders"][2:]],
    "ddl-mix": ["--threads", "1"],
}


class StreamsChaos(Chaos):
    def configure(self, cfg) -> None:
        cfg.dumper.streams = STREAMS
        if not getattr(self, "stream_base", 0):
            self.stream_base = free_base_port(STREAMS - 1)
        cfg.dumper.stream_port = self.stream_base
        cfg.dumper.stream_tables = dict(PINS)

    def start_load(self) -> None:
        for name, args in LOAD.items():
            self.spawn(name, ["workload", name, "--duration", "3600", *args])

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
        """The stream processes (children of the pipeline)."""
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


async def streams_serve(chaos: StreamsChaos, timeout: float = 90, not_pid: int = 0) -> None:
    """Until every stream's process serves (it writes its status file once its port listens),
    none of them process `not_pid` (killed)."""
    deadline = time.monotonic() + timeout
    for i in range(STREAMS):
        state = chaos.state_dir / f"stream{i}" / "status.json"
        while True:
            chaos.assert_pipeline_alive()
            with contextlib.suppress(OSError, ValueError):
                pid = json.loads(state.read_text())["pid"]
                if pid != not_pid and pid in chaos.stream_pids():
                    break
            assert time.monotonic() < deadline, f"stream {i} does not serve:\n{chaos.log_tail()}"
            await asyncio.sleep(0.2)


def stream_pid(chaos: StreamsChaos, stream: int) -> int:
    """Stream `stream`'s process: the one whose status file names it."""
    state = chaos.state_dir / f"stream{stream}" / "status.json"
    pid = json.loads(state.read_text())["pid"]
    assert pid in chaos.stream_pids(), f"stream {stream}'s process {pid} is not running"
    return pid


def executed(cfg, stream: int) -> tuple[str, int]:
    """(server_uuid, last GTID number) a stream serves (`SHOW MASTER STATUS` on its port)."""
    conn = pymysql.connect(
        host="127.0.0.1",
        port=stream_port(cfg.dumper, stream),
        user=DEFAULT_USER,
        password=DEFAULT_PASSWORD,
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            gtid_set = cur.fetchone()[4]
    finally:
        conn.close()
    uuid, _, numbers = gtid_set.partition(":")
    return uuid, int(numbers.rpartition("-")[2] or 0)


def gtids_after(cfg, stream: int, uuid: str, last: int) -> list[int]:
    """The GTID numbers a consumer at `uuid:1-last` reads from the stream (to its end)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent

    reader = BinLogStreamReader(
        connection_settings={
            "host": "127.0.0.1",
            "port": stream_port(cfg.dumper, stream),
            "user": DEFAULT_USER,
            "password": DEFAULT_PASSWORD,
        },
        server_id=4099,
        blocking=False,
        auto_position=f"{uuid}:1-{last}",
        only_events=[GtidEvent],
    )
    try:
        return [int(ev.gtid.rpartition(":")[2]) for ev in reader]
    finally:
        reader.close()


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


async def add_dns(chaos: StreamsChaos, count: int) -> None:
    """`count` more DNs, each added to the cluster by `cdc cn add-dn` while everything runs."""
    for _ in range(count):
        dn = await asyncio.to_thread(chaos.add_dn)
        out = await asyncio.to_thread(chaos.run_cdc, "cn", "add-dn", "--dn", str(dn))
        assert f"DN {dn} added" in out and "acknowledged" in out, out


async def kill_streams(chaos: StreamsChaos, streams: list[int]) -> None:
    """SIGKILL each stream's process in turn, the next once the merge started the last one
    again (the traffic goes on meanwhile)."""
    for stream in streams:
        victim = stream_pid(chaos, stream)
        os.kill(victim, signal.SIGKILL)
        await streams_serve(chaos, not_pid=victim)


async def test_two_streams_survive_ddl_a_scale_out_and_killed_streams(tmp_path):
    started = time.monotonic()

    def phase(what: str) -> None:
        print(f"{time.monotonic() - started:6.1f}s {what}")

    chaos = StreamsChaos(tmp_path)
    try:
        phase("cluster up")
        assert chaos.cfg.dumper.stream_tables == PINS
        chaos.start_pipeline()
        await streams_serve(chaos)
        phase("pipeline and streams serve")
        chaos.attach_replica()
        chaos.start_load()
        await tables_created(chaos, 6)  # bank.accounts, shop's 4 and mix.items
        phase("tables created")
        await asyncio.sleep(TRAFFIC_S)
        uuid, consumed = executed(chaos.cfg, 1)  # a GTID consumer of stream 1 got this far
        # Each stream's process is killed in turn while a DN joins (the scale-out's
        # StorageChange, its partition copies and moves): the restarts overlap the scale-out
        # (test time), and a restart meets a cluster change in flight.
        await asyncio.gather(add_dns(chaos, ADD_DNS), kill_streams(chaos, [1, 0]))
        phase(f"{ADD_DNS} DN(s) added; streams 1 and 0 killed and back")
        await asyncio.sleep(TRAFFIC_S)
        summary = await chaos.prove("ddl-mix, a scale-out and a SIGKILL of each stream's process")
        print(summary)
        phase("proved")
        _, end = executed(chaos.cfg, 1)
        assert consumed > 0 and end > consumed
        got = gtids_after(chaos.cfg, 1, uuid, consumed)
        assert got == list(range(consumed + 1, end + 1)), (consumed, end, got[:5], got[-5:])
        # the pin held: ddl-mix's scratch table (its DDL) is in stream 0's files only
        has_scratch = [
            any(
                b"scratch" in f.read_bytes()
                for f in stream_dir(chaos.cfg.dumper, i).glob("binlog.0*")
            )
            for i in range(STREAMS)
        ]
        assert has_scratch == [True, False]
        rows = show_binary_streams(chaos.cfg)
        assert [r[0] for r in rows] == ["stream0", "stream1"]
        assert [r[1] for r in rows] == [stream_port(chaos.cfg.dumper, i) for i in range(STREAMS)]
        assert all(r[2] == "binlog.000001" and r[3] > 4 and r[4] for r in rows), rows
    finally:
        chaos.close()
