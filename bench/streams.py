"""`cdc bench streams`: the pipeline's catch-up into 1, 2 and 4 streams (docs/streams.md) over
the same DN binlogs, side by side: catch-up time, events/s written in all streams, and CPU per
DN event of the merge process (MergeJoint, the split, the encoders) and of each stream's writer
process (stamping, CRC, fsync).

Traffic is generated once (transfers and bulk inserts over several tables, as `cdc bench
pipeline`); each stream count then catches up from nothing, with a meta database and binlog
directory of its own. One stream is the plain `Leader` (no stream processes: today's path).
`busy`: the streams that got rows (this traffic's rows are on two tables, bank.accounts and
bank.ledger: at 4 streams two of them are idle, so 4 streams do 2 streams' work plus two idle
processes). For instruction counts of the merge's per-stream work, offline and free of the
machine's load: `python -m bench.streams_replay` under callgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.goals import Figures
from bench.pipeline import (
    GENERATED,
    Cpu,
    _drop_meta,
    _generate,
    bench_cluster,
    count_events,
    raw_dump_all,
    sched_s,
)
from bench.pipeline import catch_up as pipeline_catch_up
from cdc.memory_tune import tune_memory
from cdc.pauses import Pauses
from cdc.streams import stream_dir
from cdc.tasks import cancel_and_wait
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.testing import free_base_port
from dumper.pipeline import Leader
from dumper.streams import StreamOutput, stream_leader
from dumper.streams.stream_set import START_TIMEOUT_S


@dataclass(slots=True)
class StreamsRun:
    streams: int
    catch_up_s: float = 0.0
    merge_cpu_s: float = 0.0  # the merge process (the leader for one stream)
    sources_cpu_s: float = 0.0  # MergeSource processes and their fork server
    writers_cpu_s: list[float] = field(default_factory=list)  # each stream's process
    wait_s: float = 0.0
    events: int = 0  # written, every stream
    effective: int = 0
    busy: int = 0  # streams that wrote rows (the bench's tables may hash to fewer than N)
    transactions: int = 0


async def catch_up(cfg, last_tso: int, state_dir: Path) -> StreamsRun:
    """`bench.pipeline.catch_up` into `cfg.dumper.streams` streams, until every stream synced
    what it was sent. Time and CPU run from the moment the pipeline's sources start, whatever
    the stream count: what came before is start-up, paid once per `cdc start` (the stream
    processes' start: a Python, its imports, its server process, seconds of CPU on a loaded
    2-core machine; the GMS login, its TLS context; the resume points read), and not per event,
    so one stream's figure carries none of it either."""
    n = cfg.dumper.streams
    run = StreamsRun(n)
    if n > 1:
        leader = stream_leader(cfg, state_dir=state_dir, server_uuid=None, pauses=Pauses())
        await _serving(leader.output, state_dir)
    else:
        leader = Leader(cfg)
    ready: dict[str, object] = {}
    watcher = asyncio.create_task(_sources_start(leader, ready))

    async def finish(leader: Leader) -> None:
        output = leader.output
        if not isinstance(output, StreamOutput):
            leader.writer.sync()
            return
        await output.streams.sync()  # written by every stream, not only sent
        at_ready = ready.get("writers", {})
        for p in output.streams.processes:
            on, wait, _ = sched_s(p.proc.pid) if p.proc is not None else (0.0, 0.0, 0)
            base = at_ready.get(p.stream, (0.0, 0.0))  # type: ignore[union-attr]
            run.writers_cpu_s.append(on - base[0])
            run.wait_s += wait - base[1]

    cpu = Cpu()
    started, merge_at_start = time.perf_counter(), sched_s(os.getpid())[0]
    try:
        elapsed, leader = await pipeline_catch_up(cfg, last_tso, cpu, leader, finish)
    finally:
        await cancel_and_wait([watcher])
    run.catch_up_s = elapsed - (ready.get("at", started) - started)  # type: ignore[operator]
    run.merge_cpu_s = cpu.leader_s - (ready.get("merge_cpu", merge_at_start) - merge_at_start)  # type: ignore[operator]
    run.sources_cpu_s = cpu.sources_s + cpu.fork_server_s
    run.wait_s += cpu.wait_s
    run.transactions = leader.stats.transactions
    return run


async def _serving(output: StreamOutput, state_dir: Path) -> None:
    """Until every stream's process serves its port (its status file appears once its server
    listens: `dumper.service.serve`). Its start is start-up, as the merge's own is: a stream
    answers where it ends before its server (a child process: a Python and the service's
    imports, 1-2 s of CPU each on a loaded 2-core machine) is up, so the catch-up ran while N
    of them started, their CPU taken from the merge's cores and their caches (45 s of core wait
    at 4 streams against 5 s once they are up); one stream (no server here) had none."""
    await output.streams.start()
    files = [state_dir / f"stream{i}" / "status.json" for i in range(len(output.streams.processes))]
    deadline = time.monotonic() + START_TIMEOUT_S
    while not all(f.exists() for f in files):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the stream processes do not serve after {START_TIMEOUT_S}s")
        await asyncio.sleep(0.05)


async def _sources_start(leader: Leader, ready: dict) -> None:
    """When the pipeline's sources start (every stream answered where it ends before): the
    time, and the CPU spent by then."""
    while leader.checkpoints is None:  # (set once the sources are made, just before they run)
        await asyncio.sleep(0.002)
    ready["at"] = time.perf_counter()
    ready["merge_cpu"] = sched_s(os.getpid())[0]
    output = leader.output
    if isinstance(output, StreamOutput):
        ready["writers"] = {
            p.stream: sched_s(p.proc.pid)[:2]
            for p in output.streams.processes
            if p.proc is not None
        }


def _run(cfg, work: Path, last_tso: int, streams: int) -> StreamsRun:
    cfg.dumper.streams = streams
    cfg.pipeline.meta_database = f"cdc_bench_streams{streams}"
    cfg.dumper.binlog_dir = str(work / f"binlog_streams{streams}")
    state = work / f"state_streams{streams}"
    _drop_meta(cfg)
    shutil.rmtree(cfg.dumper.binlog_dir, ignore_errors=True)
    try:
        tune_memory()  # as `cdc start` does (dumper/service.run_service)
        run = asyncio.run(catch_up(cfg, last_tso, state))
        dirs = (
            [Path(cfg.dumper.binlog_dir)]
            if streams == 1
            else [stream_dir(cfg.dumper, i) for i in range(streams)]
        )
        for d in dirs:
            everything, effective = count_events(d)
            run.events += everything
            run.effective += effective
            run.busy += effective > 0
        return run
    finally:
        _drop_meta(cfg)
        shutil.rmtree(cfg.dumper.binlog_dir, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench streams", description=__doc__)
    p.add_argument("--streams", default="1,2,4", help="stream counts (default 1,2,4)")
    p.add_argument("--dns", type=int, default=3)
    p.add_argument("--events", type=int, default=300_000, help="DN events to generate")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--keep", type=Path, help="keep the cluster and its traffic here (re-runs)")
    p.add_argument(
        "--repeat", type=int, default=1, help="runs of each stream count; the goal takes the least"
    )
    args = p.parse_args(argv)
    counts = [int(n) for n in args.streams.split(",")]
    with bench_cluster(args.dns, args.keep) as (work, cluster, generated):
        cfg = cluster.config()
        base = free_base_port(max(counts) + 1)
        cfg.dumper.port = base
        cfg.cn.ground_truth_log = str(work / "truth.jsonl")
        if not generated:
            committed = _generate(cfg, cluster, work, 0, None, args.events, args.threads)
            # (a re-run with --keep measures the same DN binlogs, as `cdc bench pipeline`'s)
            (work / GENERATED).write_text(json.dumps({"committed": committed}))
        truth = read_ground_truth(cfg.cn.ground_truth_log)
        last_tso = max(e["tso"] for e in truth if e["kind"] == "txn")
        shutil.rmtree(work / "raw", ignore_errors=True)
        _, raw_bytes = raw_dump_all(cluster, work / "raw")
        dn_events = sum(count_events(work / "raw" / dn.name)[0] for dn in cluster.dns)
        print(
            f"streams bench: {args.dns} DNs, DN binlogs {raw_bytes / 1e6:.1f} MB,"
            f" {dn_events:,} DN events; CPU in us per DN event"
        )
        print(
            f"  {'streams':>7} {'catch-up':>9} {'events/s':>10} {'txns':>8} {'merge':>7}"
            f" {f'vs {counts[0]}':>6} {'sources':>8} {'writers (each)':<30} {'core wait':>9} {'busy':>4}"
        )
        merge: dict[int, list[float]] = {n: [] for n in counts}  # by stream count, each run
        for _ in range(args.repeat):  # (the counts in turn: each meets the machine's load)
            for n in counts:
                r = _run(cfg, work, last_tso, n)
                per = 1e6 / max(1, dn_events)
                m = r.merge_cpu_s * per
                merge[n].append(m)
                writers = " ".join(f"{w * per:.2f}" for w in r.writers_cpu_s) or "(in the merge)"
                print(
                    f"  {n:>7} {r.catch_up_s:>7.2f} s {r.events / r.catch_up_s:>10,.0f}"
                    f" {r.transactions:>8,} {m:>7.2f} {m / max(merge[counts[0]][-1], 1e-9):>6.2f}"
                    f" {r.sources_cpu_s * per:>8.2f} {writers:<30} {r.wait_s:>7.2f} s {r.busy:>4}",
                    flush=True,
                )
    if len(counts) > 1:
        # Flat as streams grow: the most streams' merge CPU per DN event against one stream's,
        # each the least of its runs (the run the machine's other load inflated least: on a
        # shared 2-core box the same work's CPU time swings by half from run to run).
        first, most = counts[0], max(counts)
        if args.repeat > 1:
            least = "  ".join(f"{n}: {min(merge[n]):.2f}" for n in counts)
            print(f"merge CPU per DN event, the least of {args.repeat} runs: {least}")
        ratio = min(merge[most]) / max(min(merge[first]), 1e-9)
        other = "" if first == 1 else f"ran {most} / {first} streams"
        verdict = figures.goal("streams", ratio, f"{most} streams", other)
        print(f"merge CPU per DN event, {most} streams / {first}: {ratio:.2f} {verdict}")
    return 0


__all__ = ["main"]
