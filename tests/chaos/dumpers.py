"""The dumper processes of an HA test (`cdc start --dumper-id N` each): start, kill, status,
and whether two copies are byte-identical; `two_dumpers`: the cluster and config they share;
`Consumer`: an ordinary consumer of one of them, and what it was served; `end_run`: a run's
teardown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from binlog_writer import layout
from cdc.config import Config, DumperPeer, load
from cdc.protocol.dump_client import BinlogPosition, DumpClient, DumpSettings
from cdc.tasks import cancel_and_wait
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from dumper.ha.election import order

LEASE_MS = 5000  # the default (a shorter lease fenced a healthy leader on a loaded machine)


@contextlib.contextmanager
def two_dumpers(
    root: Path, dns: int, tune: Callable[[Config], None] = lambda cfg: None, streams: int = 1
) -> Iterator[tuple[Config, str]]:
    """A throw-away cluster of `dns` DNs under `root` and the config of two HA dumpers on it
    (peers 1 and 2, each its own binlog directory under `root`, the default lease renewed
    every second, checkpoints every 200 ms; `[dumper] streams`, each peer's stream ports after
    its port), `tune`d by the test, written to `root`/cdc.toml: (the config as loaded back, its
    path). The cluster is stopped on exit."""
    cluster = throwaway_cluster(root / "cluster", dns=dns)
    try:
        cfg = cluster.config()
        step = 1 if streams == 1 else streams + 1  # (each peer: its port, then its streams')
        base = free_base_port(2 * step)
        cfg.dumper.streams = streams
        cfg.dumper.peers = [
            DumperPeer(i, port=base + 1 + (i - 1) * step, binlog_dir=str(root / f"d{i}" / "binlog"))
            for i in (1, 2)
        ]
        cfg.dumper.binlog_dir = str(root / "unused-binlog")
        cfg.dumper.lease_ms, cfg.dumper.lease_renew_ms = LEASE_MS, 1000
        cfg.pipeline.checkpoint_interval_ms = 200
        tune(cfg)
        config_path = str(root / "cdc.toml")
        cfg.dump(config_path)
        yield load(config_path), config_path
    finally:
        cluster.down()


class Dumpers:
    """The dumper processes of the test, by id: start, kill, read their status. `hosts`: the
    host (cdc_equipment/local_cluster/hosts.py) each runs on, by id; the others run here."""

    def __init__(self, config_path: str, root: Path, hosts: dict | None = None):
        self.config_path, self.root = config_path, root
        self.hosts = hosts or {}
        self.procs: dict[int, subprocess.Popen] = {}
        self.log = open(root / "dumpers.log", "ab")

    def start(self, i: int) -> None:
        argv = [sys.executable, "-m", "cdc_cli.main", "start", "--config", self.config_path]
        argv += ["--dumper-id", str(i)]
        self.procs[i] = subprocess.Popen(
            self.hosts[i].argv(argv) if i in self.hosts else argv,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self, i: int, *, group: bool = False) -> None:
        """SIGKILL dumper `i`; `group`: and every process it started (a host that dies: its
        merge, stream processes and servers, MergeSources: one session, `start`)."""
        proc = self.procs.pop(i)
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def status(self, i: int) -> dict:
        try:
            status = json.loads((self.root / f"d{i}" / f"pipeline-{i}" / "status.json").read_text())
        except (OSError, ValueError):
            return {}
        return status if status.get("written_at", 0) > time.time() - 3 else {}

    def stream_status(self, i: int, stream: int) -> dict:
        """Stream `stream`'s process of dumper `i`, as it last wrote its status."""
        path = self.root / f"d{i}" / f"pipeline-{i}" / f"stream{stream}" / "status.json"
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return status if status.get("written_at", 0) > time.time() - 3 else {}

    def role(self, i: int) -> str:
        return self.status(i).get("ha", {}).get("role", "")

    def binlog(self, i: int) -> Path:
        return self.root / f"d{i}" / "binlog"

    async def wait(self, what, timeout: float, message: str):
        deadline = time.monotonic() + timeout
        while not (result := what()):
            for i, p in self.procs.items():
                assert p.poll() is None, f"dumper {i} exited: {self.tail()}"
            assert time.monotonic() < deadline, f"{message}: {self.tail()}"
            await asyncio.sleep(0.1)
        return result

    def tail(self) -> str:
        self.log.flush()
        return (self.root / "dumpers.log").read_text()[-4000:]

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.log.close()


def copies_identical(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir() if p.name.startswith("binlog."))
    other = sorted(p.name for p in b.iterdir() if p.name.startswith("binlog."))
    return names == other and all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def copy_end(binlog: Path) -> tuple[int, int]:
    """Where the binlog in `binlog` ends, in stream order ((0, 0): no file)."""
    names = layout.read_index(binlog, "binlog")
    if not names:
        return (0, 0)
    return order(names[-1], (binlog / names[-1]).stat().st_size)


SKIP_TYPES = {4, 15, 27}  # ROTATE, FORMAT_DESCRIPTION (its in-use flag), HEARTBEAT


class Consumer:
    """An ordinary consumer of one dumper port (a dump in a task): every event it was served."""

    def __init__(self, port: int) -> None:
        settings = DumpSettings(
            "127.0.0.1", port, DEFAULT_USER, DEFAULT_PASSWORD, server_id=7000, reconnect=False
        )
        settings.keep_rotate = True
        self.client = DumpClient(settings, BinlogPosition("", 4))
        self.events: list[tuple[str, int, bytes]] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        with contextlib.suppress(Exception):  # (its dumper is killed under it)
            async for batch in self.client.batches():
                self.events += [
                    (e.file, e.pos, e.data)
                    for e in batch
                    if e.pos > 4 and e.type_code not in SKIP_TYPES
                ]

    def end(self) -> tuple[int, int]:
        file, pos, data = self.events[-1] if self.events else ("", 0, b"")
        return order(file, pos + len(data))

    async def close(self) -> None:
        await cancel_and_wait([self.task])
        with contextlib.suppress(Exception):
            await self.client.close()


async def end_run(dumpers: Dumpers, cn, load_task: asyncio.Task | None, consumer=None) -> None:
    """The end of an HA chaos run, passed or failed: its consumer, its load, the dumpers, the
    CN (bounded: a CN whose DNs were killed under it must not hang the test's teardown)."""
    if consumer is not None:
        await consumer.close()
    if load_task is not None:
        # cancel_and_wait: a single cancel can be swallowed (3.11) and hang a failed run.
        await cancel_and_wait([load_task])
    dumpers.stop()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(30):
            await cn.close()


def served_bytes(a: tuple[int, int], b: tuple[int, int]) -> str:
    return str(b[1] - a[1]) if a[0] == b[0] else f"(file {a[0]} → {b[0]})"


def not_in(events: list[tuple[str, int, bytes]], binlog: Path) -> list[str]:
    """The consumer's events whose bytes the binlog in `binlog` does not hold (a fork)."""
    bad, files = [], {}
    for file, pos, data in events:
        if file not in files:
            path = binlog / file
            files[file] = path.read_bytes() if path.exists() else b""
        if files[file][pos : pos + len(data)] != data:
            bad.append(f"{file}:{pos} ({len(data)} bytes)")
    return bad
