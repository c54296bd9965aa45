"""The compatibility matrix runs against ONE real pipeline shared by every test of tests/compat/:
a 3-DN cluster, the reference CN with a few seconds of transfer and orders traffic, and the
pipeline + dumper (`cdc start`) serving the global binlog until the last compat test is done.

The pipeline runs as a child process, as `cdc start` does in production: the dumper then keeps
serving while a test blocks in a subprocess (mariadb, node) or in a synchronous client, and
`dumper.service.serve` may install its signal handlers (which only work in a main thread).
Scope "package": one pipeline for all the test files here, not one per file.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pytest

from cdc.config import Config
from cdc_cli.commands.demo import wait_until_merging
from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.orders import OrdersWorkload
from cdc_equipment.cn.workloads.runner import WorkloadStats, run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, stop_process, throwaway_cluster

ACCOUNTS = 100
BALANCE = 1000
TRAFFIC_S = 3.0
LARGE_ROWS = 2000


@dataclass(slots=True)
class Pipeline:
    config: Config
    config_path: Path
    directory: Path
    binlog_dir: Path
    truth: Path
    transfers: WorkloadStats
    orders: WorkloadStats
    totals: tuple[int, int]  # (accounts, total balance) read through the CN at the end
    host: str = "127.0.0.1"
    user: str = DEFAULT_USER
    password: str = DEFAULT_PASSWORD

    @property
    def port(self) -> int:
        return self.config.dumper.port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


async def drive_traffic(cfg: Config) -> tuple[WorkloadStats, WorkloadStats, tuple[int, int]]:
    cn = ComputeNode(cfg)
    await cn.start()
    # The CN's idempotent CREATE ... IF NOT EXISTS notes ("database exists") are not news.
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        transfer = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)
        orders = OrdersWorkload(cn, customers=50, large_rows=2000, large_every=200)
        await transfer.setup()
        await orders.setup()
        transfers, order_stats = await asyncio.gather(
            run_workload(transfer.step, threads=3, duration_s=TRAFFIC_S),
            run_workload(orders.step, threads=2, duration_s=TRAFFIC_S),
        )
        # One large transaction (2000 rows over every DN) for sure, not only by chance.
        large = OrdersWorkload(cn, customers=50, large_rows=LARGE_ROWS, large_every=1)
        await large.step(random.Random(0))
        return transfers, order_stats, await transfer.totals()
    finally:
        await cn.close()


async def transfers_until(
    cfg: Config,
    stop: threading.Event,
    *,
    accounts: int,
    partitions: int,
    threads: int = 1,
    tps: float = 20.0,
) -> None:
    """Transfers through a CN of `cfg` until `stop` is set (a thread's event: tests stop it
    from outside the loop); the transfers under way finish."""
    cn = ComputeNode(cfg)
    await cn.start()
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        transfer = TransferWorkload(
            cn, accounts=accounts, initial_balance=BALANCE, partitions=partitions
        )
        await transfer.setup()
        done = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.1)
            done.set()

        watcher = asyncio.create_task(watch())
        await run_workload(transfer.step, threads=threads, duration_s=3600, tps=tps, stop=done)
        await watcher
    finally:
        await cn.close()


def wait_for_port(proc: subprocess.Popen, port: int, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the pipeline exited with {proc.returncode}:\n{tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"the dumper did not listen on {port} within {timeout}s:\n{tail(log)}")


@contextlib.contextmanager
def cdc_start(cfg: Config, directory: Path) -> Iterator[subprocess.Popen]:
    """`cdc start` for `cfg` as a child process, as in production: the config dumped to
    `directory/cdc.toml`, the cluster initialised (CdcStart: the pipeline's starting point),
    the output appended to `directory/pipeline.log`. Yields once the dumper listens and the
    pipeline merges (its heartbeat CN runs recovery when it starts, which must not race a
    workload CN, as in `cdc demo`); stops it on leaving."""
    config_path = directory / "cdc.toml"
    log_path = directory / "pipeline.log"
    cfg.dump(config_path)
    asyncio.run(init(cfg))
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cdc_cli.main", "start", "--config", str(config_path)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_port(proc, cfg.dumper.port, log_path)
        wait_until_merging(directory / "pipeline" / "status.json")
        yield proc
    finally:
        stop_process(proc, grace_s=20)


def wait_until_written(binlog_dir: Path, tso: int, log: Path, timeout: float = 60) -> None:
    """Until the CTS mark of `tso` is in the global binlog (files are flushed per batch)."""
    mark = b"CTS::%d" % tso
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(mark in f.read_bytes() for f in sorted(binlog_dir.glob("binlog.[0-9]*"))):
            return
        time.sleep(0.1)
    raise TimeoutError(f"TSO {tso} not in the global binlog after {timeout}s:\n{tail(log)}")


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="package")
def pipeline(tmp_path_factory) -> Pipeline:
    directory = tmp_path_factory.mktemp("compat")
    cluster = throwaway_cluster(directory / "cluster", dns=3)
    try:
        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(directory / "binlog")
        cfg.dumper.port = free_base_port(0)
        cfg.cn.ground_truth_log = str(directory / "truth.jsonl")
        cfg.pipeline.checkpoint_interval_ms = 200
        with cdc_start(cfg, directory):
            # Bounded: a CN transaction stuck on a lock must fail the fixture, not hang the run.
            transfers, orders, totals = asyncio.run(
                asyncio.wait_for(drive_traffic(cfg), TRAFFIC_S + 60)
            )
            truth = Path(cfg.cn.ground_truth_log)
            last = max(e["tso"] for e in read_ground_truth(truth) if e["kind"] == "txn")
            wait_until_written(Path(cfg.dumper.binlog_dir), last, directory / "pipeline.log")
            yield Pipeline(
                cfg,
                directory / "cdc.toml",
                directory,
                Path(cfg.dumper.binlog_dir),
                truth,
                transfers,
                orders,
                totals,
            )
    finally:
        cluster.down()
