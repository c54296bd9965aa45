"""A stream on another host, end to end (docs/streams.md, "A stream on another host"): the
pipeline (`dumper.service.serve`, the merge with stream 0's process) runs in the root network
namespace over a cluster of 2 DNs; stream 1, where `bank` is pinned, is `cdc stream serve
--stream 1` in a network namespace of its own (a separate host: its own veth and address, its
own binlog directory). Under transfer traffic its process is SIGKILLed (its listener starts
another for the merge's next link), then its listener is (the merge shows the pause
`stream_unreachable`; the listener is started again by hand); in the end `cdc verify-binlog`
reads stream 0 on this host and stream 1 on its own and finds every committed transaction
once in the union, each stream in order with gapless GTIDs and the transfer total kept.
Needs root and `ip` (skipped otherwise)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from cdc.config import load
from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from dumper.service import serve
from tests.dumper.streams.test_stream_remote import (  # noqa: F401 (host2: a fixture)
    ROOT,
    SECRET,
    host2,
    pytestmark,
    stop,
)
from tests.dumper.streams.test_stream_remote import serve as serve_stream
from tests.e2e.test_pipeline import ACCOUNTS, BALANCE

TIMEOUT_S = 90


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


async def until(predicate, what: str, service: asyncio.Task) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        while not predicate():
            assert not service.done(), f"the pipeline stopped: {service.exception()}"
            await asyncio.sleep(0.1)
    print(f"ok: {what}")


async def test_a_remote_stream_under_transfers_survives_its_kills(tmp_path, host2):  # noqa: F811
    ns, _, address = host2
    cluster = throwaway_cluster(tmp_path / "cluster", dns=2, spare_dns=0)
    cfg = cluster.config()
    cfg.dumper.port = free_base_port(2)
    cfg.dumper.binlog_dir = str(tmp_path / "binlog")
    cfg.dumper.streams = 2
    cfg.dumper.stream_tables = {"bank": 1}
    cfg.dumper.stream_addresses = {"1": f"{address}:7000"}
    cfg.dumper.stream_secret = SECRET
    cfg.dumper.serve_process = False  # (half the process starts: test time)
    cfg.cn.ground_truth_log = str(tmp_path / "truth.jsonl")
    cfg.pipeline.checkpoint_interval_ms = 200
    cfg.dump(tmp_path / "cdc.toml")
    remote = load(tmp_path / "cdc.toml")  # host2's: its own binlog directory and address
    remote.dumper.host = address
    remote.dumper.binlog_dir = str(tmp_path / "host2" / "binlog")
    (tmp_path / "host2").mkdir()
    remote.dump(tmp_path / "host2" / "cdc.toml")
    stream1 = tmp_path / "pipeline" / "stream1" / "status.json"  # as the merge keeps it
    merge = tmp_path / "pipeline" / "status.json"

    listener = serve_stream(ns, tmp_path / "host2" / "cdc.toml")
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=4)
    service = asyncio.create_task(serve(cfg, tmp_path / "pipeline", heartbeat=True))
    halt = asyncio.Event()
    traffic = None
    try:
        await workload.setup()
        traffic = asyncio.create_task(
            run_workload(workload.step, threads=2, duration_s=TIMEOUT_S, stop=halt)
        )
        await until(lambda: _json(stream1).get("gno", 0) > 10, "stream 1 written", service)
        victim = _json(stream1)["pid"]
        os.kill(victim, signal.SIGKILL)
        await until(
            lambda: _json(stream1).get("pid", victim) != victim, "stream 1 started again", service
        )
        gno = _json(stream1)["gno"]
        await until(lambda: _json(stream1).get("gno", 0) > gno + 10, "stream 1 goes on", service)

        stop(listener, signal.SIGKILL)  # the stream's process ends with its listener
        await until(
            lambda: "stream_unreachable" in {p["reason"] for p in _json(merge).get("pauses", [])},
            "the merge waits for stream 1's host",
            service,
        )
        listener = serve_stream(ns, tmp_path / "host2" / "cdc.toml")
        await until(lambda: not _json(merge).get("pauses"), "the merge goes on", service)
        gno = _json(stream1).get("gno", 0)
        await until(lambda: _json(stream1).get("gno", 0) > gno + 10, "stream 1 goes on", service)
        halt.set()
        stats = await traffic
        assert stats.committed > 0 and stats.failed == 0

        truth = read_ground_truth(cfg.cn.ground_truth_log)
        last = max(e["tso"] for e in truth if e["kind"] in ("txn", "ddl"))
        await until(lambda: _json(stream1).get("last_tso", 0) >= last, "caught up", service)
        verify = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "cdc_cli.main",
                "verify-binlog",
                "--config",
                str(tmp_path / "cdc.toml"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        print(verify.stdout)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert "union of 2 streams" in verify.stdout
    finally:
        halt.set()
        if traffic is not None:
            await asyncio.gather(traffic, return_exceptions=True)
        service.cancel()
        await asyncio.gather(service, return_exceptions=True)
        await cn.close()
        stop(listener)
        cluster.down()
    assert not (tmp_path / "binlog" / "stream1").exists()  # stream 1's files are host2's
