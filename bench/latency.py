"""`cdc bench latency`: commit at the CN → the transaction's `CTS::<tso>` mark reaches a dump
client of the dumper, under a steady CN load.

Three processes, as in production: the pipeline (`cdc start`, with its CN heartbeat task at
`--heartbeat-ms`), a dump client of the dumper (our asyncio protocol client, in its own process
so that the load does not delay its reads), and this process, which runs the reference CN at a
target rate with several workers: single-row updates and, for `--transfers` of them, two-row
transfers (two DNs, usually). Both sides stamp `time.monotonic()` (one system-wide clock on
Linux): after the CN's commit returned, and when the batch holding the mark was read.

`--ha`: two dumper processes (leader + follower, `[dumper] serve_acknowledged_only`) and two
dump clients of the LEADER side by side: an ordinary consumer, held back to what the follower
acknowledged, and one with the follower's server_id, which (like a follower) gets what is
written: the difference is the cost of serving acknowledged data only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import latency_stages
from bench.goals import Figures
from cdc import stage_trace
from cdc_equipment.cn.workloads.steady import (
    multi_cn_load,
    prepare,
    process_cpu_s,
    run_fast,
    steady_load,
    tree_cpu_s,
)
from cdc_equipment.local_cluster.testing import free_base_port, scratch_cluster, stop_process

WARMUP_S = 1.0  # commits in the load's first second are not counted (caches, pipes filling)


# -- the dump client (own process) -------------------------------------------------------------
def watch(host: str, port: int, user: str, password: str, conn, server_id: int = 7900) -> None:
    """Process entry: dump the global binlog from its current end; send "ready", then on "stop"
    send back {tso: monotonic time the mark was read}."""
    asyncio.run(_watch(host, port, user, password, conn, server_id))


async def _watch(host: str, port: int, user: str, password: str, conn, server_id: int) -> None:
    from cdc.binlog.events import cts_mark_text, parse_cts
    from cdc.protocol import BinlogPosition, DumpClient, DumpSettings
    from cdc.protocol.client import MysqlClient

    trace = stage_trace.start("client")  # noqa: F841 (kept alive)
    probe = await MysqlClient.connect(host, port, user, password)
    file, pos = (await probe.query("SHOW MASTER STATUS")).rows[0][:2]
    await probe.quit()
    settings = DumpSettings(host, port, user, password, server_id=server_id, name="dumper")
    settings.reconnect = False
    client = DumpClient(settings, BinlogPosition(file, int(pos)))
    seen: dict[int, float] = {}
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(conn.fileno(), stop.set)  # the only message after "ready" is "stop"

    async def read() -> None:
        async for batch in client.batches():
            now = time.monotonic()
            for ev in batch:
                mark = cts_mark_text(ev.data)
                if mark is not None:
                    tso = parse_cts(mark)
                    if tso is not None:
                        seen[tso] = now
                        stage_trace.stamp("seen", tso, now)

    reader = asyncio.create_task(read())
    conn.send("ready")
    await asyncio.wait([reader, asyncio.create_task(stop.wait())], return_when="FIRST_COMPLETED")
    if reader.done():
        reader.result()  # the dump ended: raise why
    loop.remove_reader(conn.fileno())
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    conn.recv()
    conn.send(seen)


@dataclass(slots=True)
class Latency:
    target_tps: float
    achieved_tps: float
    counted: int  # transactions after the warm-up
    missing: int  # committed but never seen by the dump client
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    warmup_max_ms: float  # the slowest of the commits in the warm-up (not counted above)
    txn_p50_ms: float  # CN transaction duration (start → commit returned)
    txn_p99_ms: float
    pipeline_cpu: float  # CPU of the pipeline processes / wall time during the load (1.0 = a core)
    load_cpu: float  # same for the CN process(es), summed
    servers_cpu: float  # same for the MariaDB servers (DNs and GMS)
    stages: latency_stages.StageReport | None = None  # where the latency goes (traced runs)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def summarize(
    commits: list[tuple[int, float]], seen: dict[int, float], start: float
) -> tuple[list[float], int, float]:
    """(sorted latencies in ms of commits after the warm-up, how many were never seen, the
    largest latency in the warm-up). `start`: when the load began (after the CN processes
    started and connected: their start-up is not the steady state this bench is about)."""
    counted = [(tso, t) for tso, t in commits if t >= start + WARMUP_S]
    lat = sorted((seen[tso] - t) * 1000 for tso, t in counted if tso in seen)
    warmup = [(seen[tso] - t) * 1000 for tso, t in commits if tso in seen and t < start + WARMUP_S]
    return lat, len(counted) - len(lat), max(warmup, default=float("nan"))


def start_pipeline(
    config_path: Path, state: Path, log, dumper_id: int = 0, role: str = ""
) -> subprocess.Popen:
    """`cdc start` (as HA peer `dumper_id`, if set), once its status file shows `role`."""
    args = ["--dumper-id", str(dumper_id)] if dumper_id else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc_cli.main", "start", "--config", str(config_path), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            status = json.loads((state / "status.json").read_text())
            if not role or status.get("ha", {}).get("role") == role:
                return proc
        except (OSError, ValueError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the pipeline did not start; see {log.name}")
        time.sleep(0.1)


def measure(
    *,
    dns: int = 3,
    tps: float = 2000,
    seconds: float = 20,
    heartbeat_ms: int = 200,
    workers: int = 16,
    transfers: float = 0.2,
    cn_processes: int = 1,
    ha: bool = False,
    stages: bool = True,
) -> dict[str, Latency]:
    """One Latency per dump client: "consumer" (and, with `ha`, "unheld": a reader with the
    follower's server_id, never held back for acknowledgements)."""
    from cdc.config import DumperPeer, load
    from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
    from dumper.ha.peers import FOLLOWER_SERVER_ID_BASE

    with scratch_cluster("cdc-bench-latency-", dns) as (work, cluster):
        pipelines: list[subprocess.Popen] = []
        watchers: dict[str, tuple] = {}
        traces = latency_stages.trace_dir(work)
        if stages:  # inherited by the pipeline, its MergeSources, the CN and client processes
            os.environ[stage_trace.ENV] = str(traces)
        try:
            cfg = cluster.config()
            cfg.cn.heartbeat_interval_ms = heartbeat_ms
            cfg.dumper.binlog_dir = str(work / "binlog")
            if ha:
                base = free_base_port(2)
                cfg.dumper.peers = [
                    DumperPeer(i, port=base + i, binlog_dir=str(work / f"d{i}" / "binlog"))
                    for i in (1, 2)
                ]
            else:
                cfg.dumper.port = free_base_port(0)
            config_path = work / "cdc.toml"
            cfg.dump(config_path)
            cfg = load(config_path)
            asyncio.run(prepare(cfg))
            log = open(work / "pipeline.log", "ab")
            if ha:
                for i, role in ((1, "leader"), (2, "follower")):
                    state = work / f"d{i}" / f"pipeline-{i}"
                    pipelines.append(start_pipeline(config_path, state, log, i, role))
                port = cfg.dumper.peers[0].port
                readers = {"consumer": 7900, "unheld": FOLLOWER_SERVER_ID_BASE + 2}
            else:
                pipelines.append(start_pipeline(config_path, work / "pipeline", log))
                port = cfg.dumper.port
                readers = {"consumer": 7900}
            ctx = multiprocessing.get_context("spawn")
            for name, server_id in readers.items():
                ours, theirs = multiprocessing.Pipe()
                proc = ctx.Process(
                    target=watch,
                    args=(cfg.dumper.host, port, DEFAULT_USER, DEFAULT_PASSWORD, theirs, server_id),
                    daemon=True,
                )
                proc.start()
                watchers[name] = (proc, ours)
            for _, ours in watchers.values():
                if not ours.poll(60) or ours.recv() != "ready":
                    raise RuntimeError("the dump client did not connect to the dumper")
            time.sleep(2 * heartbeat_ms / 1000)  # the setup's transactions pass first
            if stages:
                server_pids = [p for p in (srv.pid() for srv in cluster.servers()) if p]

                def ours() -> float:  # this process's tree (CN, pipeline, clients) + servers
                    tree = tree_cpu_s(os.getpid())
                    return sum(tree.values()) + sum(
                        process_cpu_s(p) for p in server_pids if p not in tree
                    )

                sampler = latency_stages.MachineSampler(traces, ours)
                sampler.start()
            start = time.monotonic()
            leader = pipelines[0]
            pipeline_cpu = tree_cpu_s(leader.pid)
            servers = [srv.pid() for srv in cluster.servers()]
            servers_cpu = sum(process_cpu_s(p) for p in servers if p)
            if cn_processes > 1:
                load = multi_cn_load(config_path, cn_processes, tps, seconds, workers, transfers)
            else:
                load = run_fast(steady_load(cfg, tps, seconds, workers, transfers))
            pipeline_cpu = sum(
                cpu - pipeline_cpu.get(p, 0.0) for p, cpu in tree_cpu_s(leader.pid).items()
            )
            servers_cpu = sum(process_cpu_s(p) for p in servers if p) - servers_cpu
            commits, durations, elapsed = load.commits, sorted(load.durations), load.elapsed_s
            start = load.started_at or start
            # Wait for the last marks (at most 10 s: the pipeline may be far behind).
            time.sleep(min(10.0, 1.0 + 5 * heartbeat_ms / 1000))
            out = {}
            for name, (_, ours) in watchers.items():
                ours.send("stop")
                if not ours.poll(30):
                    raise RuntimeError("the dump client did not answer")
                lat, missing, warmup_max = summarize(commits, ours.recv(), start)
                out[name] = Latency(
                    target_tps=tps,
                    achieved_tps=len(commits) / elapsed if elapsed else 0.0,
                    counted=len(lat) + missing,
                    missing=missing,
                    p50_ms=percentile(lat, 0.50),
                    p90_ms=percentile(lat, 0.90),
                    p99_ms=percentile(lat, 0.99),
                    max_ms=lat[-1] if lat else float("nan"),
                    warmup_max_ms=warmup_max,
                    txn_p50_ms=percentile(durations, 0.50),
                    txn_p99_ms=percentile(durations, 0.99),
                    pipeline_cpu=pipeline_cpu / elapsed,
                    load_cpu=load.cpu_s / elapsed,
                    servers_cpu=servers_cpu / elapsed,
                )
            if stages:
                sampler.stop()
                stage_trace.flush()
                report = latency_stages.read(traces, start + WARMUP_S, start + elapsed)
                out["consumer"].stages = report
            return out
        finally:
            os.environ.pop(stage_trace.ENV, None)
            for proc, _ in watchers.values():
                if proc.is_alive():
                    proc.kill()
            for p in pipelines:
                stop_process(p)


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench latency", description=__doc__)
    p.add_argument("--tps", type=float, default=2000, help="target CN transactions/s")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--dns", type=int, default=3)
    p.add_argument("--heartbeat-ms", type=int, default=200)
    p.add_argument("--workers", type=int, default=16, help="concurrent transactions per CN process")
    p.add_argument(
        "--cn-processes",
        type=int,
        default=2,
        help="CN processes sharing the load (one Python process tops out at one core)",
    )
    p.add_argument(
        "--transfers", type=float, default=0.2, help="fraction of two-row (two-DN) transactions"
    )
    p.add_argument(
        "--ha",
        action="store_true",
        help="leader + follower; an ordinary consumer of the leader vs an unheld reader",
    )
    p.add_argument(
        "--no-stages",
        action="store_true",
        help="no per-stage timestamps (cdc.stage_trace; about 1 us per stage and transaction)",
    )
    args = p.parse_args(argv)
    results = measure(
        dns=args.dns,
        tps=args.tps,
        seconds=args.seconds,
        heartbeat_ms=args.heartbeat_ms,
        workers=args.workers,
        transfers=args.transfers,
        cn_processes=args.cn_processes,
        ha=args.ha,
        stages=not args.no_stages,
    )
    r = results["consumer"]
    print(
        f"latency bench: {args.dns} DNs, heartbeat {args.heartbeat_ms} ms,"
        f" {args.cn_processes} CN process(es) x {args.workers} workers,"
        f" {args.transfers:.0%} two-row transactions"
    )
    print(
        f"  CN load: target {r.target_tps:,.0f} TPS, achieved {r.achieved_tps:,.0f} TPS"
        f"   (CPU: CN {r.load_cpu:.2f}, DNs+GMS {r.servers_cpu:.2f},"
        f" pipeline {r.pipeline_cpu:.2f} cores)"
    )
    if r.achieved_tps:
        per_txn = [c / r.achieved_tps * 1000 for c in (r.load_cpu, r.servers_cpu, r.pipeline_cpu)]
        print(
            f"  CPU per transaction: CN {per_txn[0]:.2f} ms, DNs+GMS {per_txn[1]:.2f} ms,"
            f" pipeline {per_txn[2]:.2f} ms; {sum(per_txn):.2f} ms in all: 2 idle cores fit"
            f" at most {2000 / sum(per_txn):,.0f} TPS, and {r.target_tps:,.0f} TPS takes"
            f" {sum(per_txn) * r.target_tps / 1000:.1f} idle cores at these costs (CN"
            f" {per_txn[0] * r.target_tps / 1000:.1f}, DNs+GMS"
            f" {per_txn[1] * r.target_tps / 1000:.1f}, pipeline"
            f" {per_txn[2] * r.target_tps / 1000:.1f})"
        )
    if r.achieved_tps < 0.95 * r.target_tps:
        print(
            f"  NOTE: the CN did not reach the target rate on this machine: the latency below is"
            f" at {r.achieved_tps:,.0f} TPS, not {r.target_tps:,.0f}"
        )
    print(
        f"  commit -> CTS mark at a dump client: p50 {r.p50_ms:.0f} ms  p90 {r.p90_ms:.0f} ms"
        f"  p99 {r.p99_ms:.0f} ms  max {r.max_ms:.0f} ms   ({r.counted:,} transactions after"
        f" {WARMUP_S:.0f} s warm-up, {r.missing} never seen; warm-up max"
        f" {r.warmup_max_ms:.0f} ms)"
    )
    print(
        f"  CN transaction (start -> commit returned): p50 {r.txn_p50_ms:.0f} ms"
        f"  p99 {r.txn_p99_ms:.0f} ms"
    )
    if r.stages is not None:
        print("\n".join(latency_stages.describe(r.stages, args.seconds)))
    other = ""  # the goal is for 2,000 TPS with 200 ms heartbeats: other runs say nothing of it
    if args.heartbeat_ms != 200:
        other = f"heartbeats every {args.heartbeat_ms} ms"
    elif r.achieved_tps < 0.95 * 2000:
        other = f"the CN reached {r.achieved_tps:,.0f} of 2,000 TPS"
    verdict = figures.goal("latency", r.p99_ms, "HA leader" if args.ha else "", other)
    print(f"  p99 at 2,000 TPS with 200 ms heartbeats: {r.p99_ms:.0f} ms {verdict}")
    if "unheld" in results:
        u = results["unheld"]
        print(
            "  HA leader, same run: a reader not held back for the follower's acknowledgement"
            f" (follower server_id): p50 {u.p50_ms:.0f} ms  p90 {u.p90_ms:.0f} ms"
            f"  p99 {u.p99_ms:.0f} ms  max {u.max_ms:.0f} ms"
        )
        print(
            "  cost of serving acknowledged data only: p50"
            f" {r.p50_ms - u.p50_ms:+.0f} ms (x{r.p50_ms / u.p50_ms:.2f}), p99"
            f" {r.p99_ms - u.p99_ms:+.0f} ms (x{r.p99_ms / u.p99_ms:.2f})"
        )
    return 0 if all(x.missing == 0 for x in results.values()) else 1
