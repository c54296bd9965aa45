"""A steady CN load for benches: single-row updates and, for a fraction of them, two-row
transfers (usually two DNs), at a target rate, from one or several CN processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

ACCOUNTS = 20_000


def run_fast(coro, uvloop: bool = True):
    """asyncio.run on uvloop when asked and installed: the CN's cost is mostly event-loop and
    socket work, which uvloop does in C (`cdc bench cn` measures the difference)."""
    if uvloop:
        try:
            import uvloop as uv
        except ImportError:
            pass
        else:
            return uv.run(coro)
    return asyncio.run(coro)


@dataclass(slots=True)
class LoadResult:
    commits: list[tuple[int, float]]  # (commit tso, monotonic time its commit returned)
    durations: list[float]  # ms from a transaction's start to its commit's return
    elapsed_s: float
    cpu_s: float  # CPU time of the CN process(es) during the load
    started_at: float = 0.0  # monotonic time the load began (the last CN process, if several)


async def steady_load(
    cfg,
    tps: float | None,
    seconds: float,
    workers: int,
    transfers: float,
    ready=None,
    defer: bool = True,
) -> LoadResult:
    """Run a CN at `tps` (None: as fast as it goes) for `seconds`. `ready()`, if given, is
    called once the CN has started and before the load begins (several CN processes start
    their load together). `defer`: the updates use `Transaction.defer` (their results are not
    needed), else `execute`."""
    # Two connections per transaction on a DN (the branch, then the commit record): a pool
    # smaller than that deadlocks once every connection holds a branch.
    from cdc import stage_trace
    from cdc_equipment.cn import ComputeNode
    from cdc_equipment.cn.workloads.runner import run_workload
    from cdc_equipment.cn.workloads.transfer import TransferWorkload

    trace = stage_trace.start("cn")  # noqa: F841 (kept alive)
    cn = ComputeNode(cfg, pool_size=2 * workers + 4)
    await cn.start()
    await cn.pools.warm(cn.catalogue.dns, workers)
    if ready is not None:
        ready()
    cpu = time.process_time()
    started_at = time.monotonic()
    commits: list[tuple[int, float]] = []
    durations: list[float] = []  # ms from a transaction's start to its commit's return
    try:
        table = TransferWorkload(cn, accounts=ACCOUNTS).table

        async def step(rng: random.Random) -> None:
            ids = rng.sample(range(ACCOUNTS), 2 if rng.random() < transfers else 1)

            async def body(tx) -> None:
                run = tx.defer if defer else tx.execute
                for i in sorted(ids):  # id order: no cross-DN deadlock
                    # NOW(6) makes every update change the row: an unchanged row logs nothing.
                    await run(f"UPDATE {table} SET updated_at = NOW(6) WHERE id = %s", (i,))

            began = time.monotonic()
            _, tso = await cn.run_transaction(body)
            now = time.monotonic()
            commits.append((tso, now))
            stage_trace.stamp("commit", tso, now)
            durations.append((now - began) * 1000)

        stats = await asyncio.wait_for(
            run_workload(step, threads=workers, duration_s=seconds, tps=tps), seconds + 60
        )
        cpu = time.process_time() - cpu
    finally:
        await cn.close()
    return LoadResult(commits, durations, stats.elapsed_s, cpu, started_at)


def cn_process(config_path: str, tps, seconds, workers, transfers, barrier, conn) -> None:
    """Process entry: one CN (its own instance id; the TSO comes from GMS, shared by all CNs,
    docs/cn.md "TSO"), started, then the load once every CN process is ready."""
    from cdc.config import load

    result = run_fast(
        steady_load(
            load(config_path), tps, seconds, workers, transfers, ready=lambda: barrier.wait(120)
        )
    )
    conn.send(result)


def multi_cn_load(
    config_path: Path, processes: int, tps: float, seconds: float, workers: int, transfers: float
) -> LoadResult:
    """The load from `processes` CN processes (PolarDB-X runs many CNs; one Python process
    tops out at one core), each with `workers` tasks at tps/processes; results merged."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    pipes, procs = [], []
    try:
        for _ in range(processes):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=cn_process,
                args=(
                    str(config_path),
                    tps / processes if tps else None,
                    seconds,
                    workers,
                    transfers,
                    barrier,
                ),
                kwargs={"conn": theirs},
                daemon=True,
            )
            proc.start()
            pipes.append(ours)
            procs.append(proc)
        results = []
        for ours, proc in zip(pipes, procs, strict=True):
            if not ours.poll(seconds + 180):
                raise RuntimeError(f"CN load process {proc.pid} did not report")
            results.append(ours.recv())
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
    return LoadResult(
        [c for r in results for c in r.commits],
        [d for r in results for d in r.durations],
        max(r.elapsed_s for r in results),
        sum(r.cpu_s for r in results),
        max(r.started_at for r in results),
    )


async def prepare(cfg) -> None:
    from cdc_equipment.cn import ComputeNode, init
    from cdc_equipment.cn.workloads.transfer import TransferWorkload

    await init(cfg)
    async with ComputeNode(cfg) as cn:
        await TransferWorkload(cn, accounts=ACCOUNTS).setup()


# -- the bench -----------------------------------------------------------------------------------
def process_cpu_s(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> dict[int, float]:
    """{pid: CPU seconds} of a process and its live descendants (the pipeline runs each
    MergeSource in a child process)."""
    out: dict[int, float] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            out[p] = process_cpu_s(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
    return out
