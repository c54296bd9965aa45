"""A multi-stream takeover where the winner is behind another follower in one stream
(docs/streams.md, "The winner fetches the tails it lacks"), end to end: 2 DNs, `[dumper]
streams = 2` (`bank0` pinned to stream 0, `bank` to stream 1, transfer traffic in each),
three dumpers: 1 leads, 2 and 3 follow.

Each follower is made to lag in one stream, as a slow link would: the leader's stream server
is frozen (SIGSTOP) until the followers' dumps of it time out (each then waits for the
server's greeting on a new connection: a follower frozen then never logs in there, so it gets
nothing from that server even once it is thawed). So dumper 3, frozen, misses traffic of
stream 0 that dumper 2 copies; then dumper 2, frozen, misses traffic of stream 1 that dumper 3
copies, while no one copies stream 0 (its server frozen again). An ordinary consumer of each
stream has read, from the leader, as far as the furthest follower. With every stream server
of the leader frozen, dumper 2 thawed and the leader SIGKILLed with all its processes, either
wins (each is furthest in one stream; the sums of their ends decide) and is behind the other
in one stream, whose consumer read past the winner's copy there.

The winner fetches that stream's tail from the other follower before its term begins there;
each consumer, moved to the new leader at the position it had read to, reads on to the end
after more traffic: its events are the new leader's files byte for byte, contiguous (no gap, no
event twice, no error), and `cdc verify-binlog` passes for each stream and their union."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from binlog_writer import layout
from cdc.binlog.constants import EventType
from cdc.binlog.header import log_pos
from cdc.config import DumperPeer, load
from cdc.protocol import BinlogPosition, DumpClient, DumpSettings
from cdc.streams import stream_dir
from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from tests.chaos.dumpers import Dumpers, copies_identical
from tests.e2e.test_streams_failover import kill_dumper, stream_status

STREAMS = 2
DBS = ("bank0", "bank")  # stream i's transfer database
TIMEOUT_S = 90


def end_of(directory: Path) -> tuple[str, int]:
    names = layout.read_index(directory, "binlog")
    return (names[-1], (directory / names[-1]).stat().st_size) if names else ("", 0)


def order(end: tuple[str, int]) -> tuple[int, int]:
    return (layout.file_number(end[0]) if end[0] else 0, end[1])


def listener_pid(port: int) -> int:
    """The process listening on `port` (127.0.0.1): a stream's server child."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(f"socket:[{fields[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                return int(pid)
        except OSError:
            continue
    raise AssertionError(f"nothing listens on {port}")


def signal_group(dumpers: Dumpers, i: int, sig: int) -> None:
    os.killpg(dumpers.procs[i].pid, sig)


class Consumer:
    """An ordinary consumer of one stream (not a follower: the leader's ack gate holds it back)
    by file:position, from the stream's first file; `move` re-points it."""

    def __init__(self, stream: int, port: int):
        self.stream = stream
        self.events: list[tuple[str, int, bytes]] = []
        self.task = asyncio.create_task(self._read(port, BinlogPosition("", 4), False))

    @property
    def end(self) -> tuple[str, int]:
        file, pos, data = self.events[-1]
        return file, pos + len(data)

    async def _read(self, port: int, start: BinlogPosition, non_blocking: bool) -> None:
        settings = DumpSettings(
            "127.0.0.1",
            port,
            DEFAULT_USER,
            DEFAULT_PASSWORD,
            server_id=700 + self.stream,
            name=f"consumer of stream {self.stream}",
            heartbeat_period=0.5,
            idle_timeout=600,
            reconnect=False,
            keep_rotate=True,
            non_blocking=non_blocking,
        )
        client = DumpClient(settings, start)
        try:
            async for batch in client.batches():
                for ev in batch:
                    if ev.type_code == EventType.FORMAT_DESCRIPTION and not log_pos(ev.data):
                        continue  # re-sent at a mid-file start (log_pos 0)
                    self.events.append((ev.file, ev.pos, bytes(ev.data)))
        finally:
            await client.close()

    async def move(self, port: int, directory: Path) -> None:
        """Stop reading; read the rest from `port` until at the end of its `directory`: each
        read is non-blocking (to the end served then), and the new leader's end may still move
        on after the copies matched (its pipeline's lag, its ack gate waiting for the
        follower's ack of the tail), which a loaded machine makes seconds."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            await self._read(port, BinlogPosition(*self.end), True)
            if self.end == end_of(directory) or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.5)

    def check_against(self, directory: Path) -> int:
        """Every event read is the files' bytes at its position, each where the previous one
        ended (or at a file's first event after a ROTATE), the last at the files' end."""
        files = {n: (directory / n).read_bytes() for n in layout.read_index(directory, "binlog")}
        prev: tuple[str, int] | None = None
        for file, pos, data in self.events:
            if data[4] == EventType.FORMAT_DESCRIPTION:  # (its in-use flag is not sent)
                assert pos == 4, f"stream {self.stream}: an FDE at {file}:{pos}"
            else:
                assert files[file][pos : pos + len(data)] == data, (
                    f"stream {self.stream}: the event read at {file}:{pos} is not the new "
                    "leader's bytes there"
                )
            if prev is not None and prev[0] == file:
                assert pos == prev[1], f"stream {self.stream}: {file}:{pos} follows {prev}"
            elif prev is not None:
                assert pos == 4 and layout.file_number(file) == layout.file_number(prev[0]) + 1
                assert len(files[prev[0]]) == prev[1], f"{prev[0]} read only to {prev[1]}"
            prev = (file, pos + len(data))
        assert prev == end_of(directory), f"stream {self.stream}: read to {prev}"
        return len(self.events)


async def until(dumpers: Dumpers, predicate, what: str) -> None:
    started = time.monotonic()
    await dumpers.wait(predicate, TIMEOUT_S, what)
    print(f"ok: {what} ({time.monotonic() - started:.1f}s)")


async def traffic(workloads, seconds: float, streams=range(STREAMS)) -> None:
    await asyncio.gather(
        *(run_workload(workloads[i].step, threads=2, duration_s=seconds) for i in streams)
    )


@pytest.mark.slow
async def test_a_streams_tail_is_fetched_from_the_follower_ahead_in_it(tmp_path):
    started = time.monotonic()
    cluster = throwaway_cluster(tmp_path / "cluster", dns=2, spare_dns=0)
    cfg = cluster.config()
    cfg.cn.ground_truth_log = str(tmp_path / "truth.jsonl")
    cfg.pipeline.checkpoint_interval_ms = 200
    cfg.pipeline.max_file_size_mb = 1
    cfg.dumper.streams = STREAMS
    cfg.dumper.stream_tables = {db: i for i, db in enumerate(DBS)}
    base = free_base_port(3 * (STREAMS + 1))
    cfg.dumper.peers = [
        DumperPeer(
            i, port=base + (i - 1) * (STREAMS + 1), binlog_dir=str(tmp_path / f"d{i}" / "binlog")
        )
        for i in (1, 2, 3)
    ]
    config_path = tmp_path / "cdc.toml"
    cfg.dump(config_path)
    cfg = load(config_path)

    def port(dumper: int, stream: int) -> int:
        return cfg.for_dumper(dumper).dumper.port + 1 + stream

    def copy(dumper: int, stream: int) -> Path:
        return stream_dir(cfg.for_dumper(dumper).dumper, stream)

    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workloads = [TransferWorkload(cn, db=db, accounts=200, partitions=2) for db in DBS]
    dumpers = Dumpers(str(config_path), tmp_path)
    consumers: list[Consumer] = []
    try:
        for w in workloads:
            await w.setup()
        dumpers.start(1)
        await until(dumpers, lambda: stream_status(dumpers, 1, STREAMS - 1), "dumper 1 leads")
        dumpers.start(2)
        dumpers.start(3)
        await until(
            dumpers, lambda: dumpers.role(2) == dumpers.role(3) == "follower", "2 and 3 follow"
        )
        consumers = [Consumer(i, port(1, i)) for i in range(STREAMS)]
        servers = [listener_pid(port(1, i)) for i in range(STREAMS)]  # the leader's

        def copied(dumper: int, streams=range(STREAMS)) -> bool:
            return all(copies_identical(copy(1, i), copy(dumper, i)) for i in streams)

        def consumed(streams=range(STREAMS)) -> bool:
            return all(
                consumers[i].events and consumers[i].end == end_of(copy(1, i)) for i in streams
            )

        async def cut_off(stream: int, *followers: int) -> None:
            """Freeze the leader's server of `stream` and wait until the dump of each of
            `followers` from it timed out: each then waits for that server's greeting on a
            new connection, and a follower frozen meanwhile will never log in there (so it
            receives nothing from it, even once the server is thawed)."""
            log = tmp_path / "dumpers.log"
            since = log.stat().st_size
            os.kill(servers[stream], signal.SIGSTOP)

            def timed_out(follower: int) -> bool:
                lines = log.read_bytes()[since:].decode(errors="replace").splitlines()
                return any(
                    f"dumper {follower}: copy from" in line
                    and f"(127.0.0.1:{port(1, stream)})" in line
                    for line in lines
                )

            await until(
                dumpers,
                lambda: all(timed_out(f) for f in followers),
                f"the dumps of stream {stream} by {followers} timed out",
            )

        await traffic(workloads, 1.0)
        await until(dumpers, lambda: copied(2) and copied(3) and consumed(), "all copied and read")
        # Dumper 3 misses stream 0's next transactions, which dumper 2 copies.
        await cut_off(0, 2, 3)
        signal_group(dumpers, 3, signal.SIGSTOP)
        os.kill(servers[0], signal.SIGCONT)
        await traffic(workloads, 1.0)
        await until(dumpers, lambda: copied(2) and consumed(), "dumper 2 copied, all read")
        # Dumper 2 misses stream 1's next transactions, which dumper 3 copies; no one copies or
        # reads stream 0 any more.
        await cut_off(1, 2)
        os.kill(servers[0], signal.SIGSTOP)
        signal_group(dumpers, 2, signal.SIGSTOP)
        signal_group(dumpers, 3, signal.SIGCONT)
        os.kill(servers[1], signal.SIGCONT)
        await traffic(workloads, 1.0)
        await until(dumpers, lambda: copied(3, [1]) and consumed([1]), "dumper 3 copied stream 1")
        os.kill(servers[1], signal.SIGSTOP)  # every stream of the leader frozen
        signal_group(dumpers, 2, signal.SIGCONT)
        await asyncio.sleep(2 * cfg.dumper.lease_renew_ms / 1000)  # (dumper 2 reports again)
        await until(dumpers, lambda: dumpers.role(2) == "follower", "dumper 2 is back")
        ends = {d: [end_of(copy(d, i)) for i in range(STREAMS)] for d in (2, 3)}
        assert order(ends[2][0]) > order(ends[3][0]) and order(ends[3][1]) > order(ends[2][1])
        kill_dumper(dumpers, 1)
        killed_at = time.monotonic()
        await until(
            dumpers,
            lambda: any(
                dumpers.role(d) == "leader"
                and all(stream_status(dumpers, d, i).get("ha") for i in range(STREAMS))
                for d in (2, 3)
            ),
            "a new leader",
        )
        winner = 2 if dumpers.role(2) == "leader" else 3
        other = 5 - winner
        behind = [i for i in range(STREAMS) if order(ends[winner][i]) < order(ends[other][i])]
        print(
            f"{time.monotonic() - started:5.1f}s dumper {winner} took over in "
            f"{time.monotonic() - killed_at:.1f}s, behind dumper {other} in stream {behind} "
            f"(ends {ends})"
        )
        # The scenario: a consumer of that stream read past where the winner's copy ended.
        assert behind and all(order(consumers[i].end) > order(ends[winner][i]) for i in behind)
        await traffic(workloads, 1.0)
        await until(
            dumpers,
            lambda: all(copies_identical(copy(winner, i), copy(other, i)) for i in range(STREAMS)),
            f"dumper {other} follows: its copies are the new leader's streams",
        )
        for c in consumers:
            await c.move(port(winner, c.stream), copy(winner, c.stream))
            n = c.check_against(copy(winner, c.stream))
            print(f"stream {c.stream}: the consumer read {n} events, none missing or twice")

        leader_config = tmp_path / "winner.toml"
        cfg.for_dumper(winner).dump(leader_config)
        verify = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "cdc_cli.main", "verify-binlog", "--config", str(leader_config)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        print(verify.stdout)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert "union of 2 streams" in verify.stdout
    finally:
        for c in consumers:
            c.task.cancel()
        for i in list(dumpers.procs):
            if dumpers.procs[i].poll() is None:
                signal_group(dumpers, i, signal.SIGCONT)
        dumpers.stop()
        await cn.close()
        cluster.down()
    print(f"{time.monotonic() - started:5.1f}s in all")
