"""SIGKILL, at random moments under transfer traffic, the pipeline process (MergeJoint + leader
+ dumper; restarted by the test each time) or one of its MergeSource processes (the leader
restarts the pipeline itself): the global binlog still holds every committed transfer exactly
once, in TSO order, with the total unchanged after every transaction."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc.config import load
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from tests.chaos.harness import in_doubt
from tests.chaos.transfer_setup import chaos_rng, transfer_cn
from tests.e2e.global_binlog import read_global_binlog
from tests.e2e.test_pipeline import check_transfer_invariant

KILLS = int(os.environ.get("CDC_CHAOS_KILLS", "6"))


def start_pipeline(config_path: str, log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_cli.main", "start", "--config", config_path],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _children(pid: int) -> list[tuple[int, bytes]]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append((int(entry.name), cmdline))
    return out


def source_processes(pipeline_pid: int) -> list[int]:
    """The MergeSource worker processes of the pipeline: the children of its fork server, a
    child of the pipeline (forked from it, with its command line, or a Python of its own). The
    pipeline's other child, its protocol server, has none."""
    return [worker for child, _ in _children(pipeline_pid) for worker, _ in _children(child)]


@pytest.mark.parametrize("target", ["pipeline", "merge-source"])
async def test_killed_at_random_moments_loses_and_repeats_nothing(tmp_path, target):
    cluster = throwaway_cluster(tmp_path / "cluster", dns=3)
    try:
        cfg = cluster.config()
        cfg.dumper.port = free_base_port(0)
        cfg.dumper.binlog_dir = str(tmp_path / "binlog")
        cfg.cn.ground_truth_log = str(tmp_path / "truth.jsonl")
        cfg.pipeline.checkpoint_interval_ms = 200
        cfg.pipeline.max_restarts_per_minute = 10 * KILLS
        config_path = str(tmp_path / "cdc.toml")
        cfg.dump(config_path)
        cfg = load(config_path)
        cn, workload = await transfer_cn(cfg)
        rng = chaos_rng("chaos")
        log = open(tmp_path / "pipeline.log", "ab")
        proc = start_pipeline(config_path, log)
        kills = 0

        async def killer():
            nonlocal proc, kills
            while kills < KILLS:
                await asyncio.sleep(rng.uniform(0.5, 2.5))
                if target == "merge-source":
                    sources = source_processes(proc.pid)
                    if not sources:
                        continue  # between a restart and the spawn of its sources
                    os.kill(rng.choice(sources), signal.SIGKILL)
                    kills += 1
                    continue
                os.kill(proc.pid, signal.SIGKILL)
                await asyncio.to_thread(proc.wait)
                kills += 1
                if rng.random() < 0.3:
                    await asyncio.sleep(rng.uniform(0.1, 1.0))  # down for a while
                proc = start_pipeline(config_path, log)

        try:
            load_task = asyncio.create_task(
                run_workload(workload.step, threads=4, duration_s=KILLS * 1.6 + 2)
            )
            await killer()
            stats = await load_task
            # Let the last incarnation catch up: the written TSO passes the last commit.
            last_tso = max(e["tso"] for e in read_ground_truth(cfg.cn.ground_truth_log))
            status_file = tmp_path / "pipeline" / "status.json"
            deadline = time.monotonic() + 60
            while True:
                await asyncio.sleep(0.5)
                try:
                    status = json.loads(status_file.read_text())
                except (OSError, ValueError):
                    continue
                low = status.get("low_watermark_tso") or 0
                if low >= last_tso and status["written_at"] > time.time() - 2:
                    break
                assert time.monotonic() < deadline, (
                    f"pipeline did not catch up: {status}; {in_doubt(cluster)}"
                )
                assert proc.poll() is None, (tmp_path / "pipeline.log").read_text()[-3000:]
            await asyncio.sleep(1)
        finally:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                raise AssertionError("the pipeline did not stop within 30s of SIGTERM") from None
            finally:
                log.close()
            await cn.close()
        assert kills == KILLS and stats.committed > 0
        restarts = status.get("restarts", 0)
        print(f"{target}: {kills} SIGKILLs, {stats.committed} transfers, {restarts} restarts")
        if target == "merge-source":
            assert restarts >= 1
        txns = read_global_binlog(tmp_path / "binlog")
        tsos = [t.tso for t in txns]
        assert tsos == sorted(tsos), "global binlog not in TSO order"
        assert len(set(tsos)) == len(tsos), "a transaction was written twice"
        truth = {e["tso"] for e in read_ground_truth(cfg.cn.ground_truth_log)}
        assert set(tsos) <= truth | {t.tso for t in txns if t.ddl}
        transfers = [t for t in txns if any(kind == "update" for _, _, kind, _ in t.changes)]
        assert len(transfers) == stats.committed, (
            f"lost transfers: {stats.committed - len(transfers)}"
        )
        check_transfer_invariant(txns)
    finally:
        cluster.down()
