"""The dumper processes of an HA test (`cdc start --dumper-id N` each): start, kill, status,
and whether two copies are byte-identical; `two_dumpers`: the cluster and config they share."""

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

from cdc.config import Config, DumperPeer, load
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster

LEASE_MS = 5000  # the default (a shorter lease fenced a healthy leader on a loaded machine)


@contextlib.contextmanager
def two_dumpers(
    root: Path, dns: int, tune: Callable[[Config], None] = lambda cfg: None
) -> Iterator[tuple[Config, str]]:
    """A throw-away cluster of `dns` DNs under `root` and the config of two HA dumpers on it
    (peers 1 and 2, each its own binlog directory under `root`, the default lease renewed
    every second, checkpoints every 200 ms), `tune`d by the test, written to `root`/cdc.toml:
    (the config as loaded back, its path). The cluster is stopped on exit."""
    cluster = throwaway_cluster(root / "cluster", dns=dns)
    try:
        cfg = cluster.config()
        base = free_base_port(2)
        cfg.dumper.peers = [
            DumperPeer(i, port=base + i, binlog_dir=str(root / f"d{i}" / "binlog")) for i in (1, 2)
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

    def kill(self, i: int) -> None:
        proc = self.procs.pop(i)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def status(self, i: int) -> dict:
        try:
            status = json.loads((self.root / f"d{i}" / f"pipeline-{i}" / "status.json").read_text())
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
