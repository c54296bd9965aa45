"""`cdc bench latency`: commit at the CN → the transaction's `CTS::<tso>` mark reaches a dump
client of the dumper, under a steady CN load.

Three processes, as in production: the pipeline (`cdc start`, with its CN heartbeat task at
`--heartbeat-ms`), a dump client of the dumper (our asyncio protocol client, in its own process
so that the load does not delay its reads), and this process, which runs the reference CN at a
target rate with several workers: single-row updates and, for `--transfers` of them, two-row
transfers (two DNs, usually). Both sides stamp `time.monotonic()` (one system-wide clock on
Linux): after the CN's commit returned, and when the batch holding the mark was read.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cdc.cluster.testing import free_base_port, scratch_cluster, stop_process
from cdc.cn.workloads.steady import (
    multi_cn_load,
    prepare,
    process_cpu_s,
    run_fast,
    steady_load,
    tree_cpu_s,
)

ROWS_QUERY_EVENT = 29
WARMUP_S = 1.0  # commits in the first second are not counted (connections, caches)


# -- the dump client (own process) -------------------------------------------------------------
def watch(host: str, port: int, user: str, password: str, conn) -> None:
    """Process entry: dump the global binlog from its current end; send "ready", then on "stop"
    send back {tso: monotonic time the mark was read}."""
    asyncio.run(_watch(host, port, user, password, conn))


async def _watch(host: str, port: int, user: str, password: str, conn) -> None:
    from cdc.binlog.events import parse_cts
    from cdc.protocol.client import MySQLClient
    from merge_source.dump_client import BinlogPosition, DumpClient, DumpSettings

    probe = await MySQLClient.connect(host, port, user, password)
    file, pos = (await probe.query("SHOW MASTER STATUS")).rows[0][:2]
    await probe.quit()
    settings = DumpSettings(host, port, user, password, server_id=7900, name="dumper")
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
                if ev.data[4] == ROWS_QUERY_EVENT:
                    tso = parse_cts(bytes(ev.data[20:-4]))  # body: length byte, then the text
                    if tso is not None:
                        seen[tso] = now

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
    txn_p50_ms: float  # CN transaction duration (start → commit returned)
    txn_p99_ms: float
    pipeline_cpu: float  # CPU of the pipeline processes / wall time during the load (1.0 = a core)
    load_cpu: float  # same for the CN process(es), summed
    servers_cpu: float  # same for the MariaDB servers (DNs and GMS)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def summarize(
    commits: list[tuple[int, float]], seen: dict[int, float], start: float
) -> tuple[list[float], int]:
    """(sorted latencies in ms of commits after the warm-up, how many were never seen)."""
    counted = [(tso, t) for tso, t in commits if t >= start + WARMUP_S]
    lat = sorted((seen[tso] - t) * 1000 for tso, t in counted if tso in seen)
    return lat, len(counted) - len(lat)


def start_pipeline(config_path: Path, state: Path, log) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc.cli", "start", "--config", str(config_path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not (state / "status.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"the pipeline did not start; see {log.name}")
        time.sleep(0.1)
    return proc


def measure(
    *,
    dns: int = 3,
    tps: float = 2000,
    seconds: float = 20,
    heartbeat_ms: int = 200,
    workers: int = 16,
    transfers: float = 0.2,
    cn_processes: int = 1,
) -> Latency:
    from cdc.cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
    from cdc.config import load

    with scratch_cluster("cdc-bench-latency-", dns) as (work, cluster):
        pipeline = watcher = None
        try:
            cfg = cluster.config()
            cfg.cn.heartbeat_interval_ms = heartbeat_ms
            cfg.dumper.binlog_dir = str(work / "binlog")
            cfg.dumper.port = free_base_port(0)
            config_path = work / "cdc.toml"
            cfg.dump(config_path)
            cfg = load(config_path)
            asyncio.run(prepare(cfg))
            log = open(work / "pipeline.log", "ab")
            pipeline = start_pipeline(config_path, work / "pipeline", log)
            ours, theirs = multiprocessing.Pipe()
            ctx = multiprocessing.get_context("spawn")
            watcher = ctx.Process(
                target=watch,
                args=(cfg.dumper.host, cfg.dumper.port, DEFAULT_USER, DEFAULT_PASSWORD, theirs),
                daemon=True,
            )
            watcher.start()
            if not ours.poll(60) or ours.recv() != "ready":
                raise RuntimeError("the dump client did not connect to the dumper")
            time.sleep(2 * heartbeat_ms / 1000)  # the setup's transactions pass first
            start = time.monotonic()
            pipeline_cpu = tree_cpu_s(pipeline.pid)
            servers = [srv.pid() for srv in cluster.servers()]
            servers_cpu = sum(process_cpu_s(p) for p in servers if p)
            if cn_processes > 1:
                load = multi_cn_load(config_path, cn_processes, tps, seconds, workers, transfers)
            else:
                load = run_fast(steady_load(cfg, tps, seconds, workers, transfers))
            pipeline_cpu = sum(
                cpu - pipeline_cpu.get(p, 0.0) for p, cpu in tree_cpu_s(pipeline.pid).items()
            )
            servers_cpu = sum(process_cpu_s(p) for p in servers if p) - servers_cpu
            commits, durations, elapsed = load.commits, sorted(load.durations), load.elapsed_s
            # Wait for the last marks (at most 10 s: the pipeline may be far behind).
            time.sleep(min(10.0, 1.0 + 5 * heartbeat_ms / 1000))
            ours.send("stop")
            if not ours.poll(30):
                raise RuntimeError("the dump client did not answer")
            seen = ours.recv()
            lat, missing = summarize(commits, seen, start)
            return Latency(
                target_tps=tps,
                achieved_tps=len(commits) / elapsed if elapsed else 0.0,
                counted=len(lat) + missing,
                missing=missing,
                p50_ms=percentile(lat, 0.50),
                p90_ms=percentile(lat, 0.90),
                p99_ms=percentile(lat, 0.99),
                max_ms=lat[-1] if lat else float("nan"),
                txn_p50_ms=percentile(durations, 0.50),
                txn_p99_ms=percentile(durations, 0.99),
                pipeline_cpu=pipeline_cpu / elapsed,
                load_cpu=load.cpu_s / elapsed,
                servers_cpu=servers_cpu / elapsed,
            )
        finally:
            if watcher is not None and watcher.is_alive():
                watcher.kill()
            if pipeline is not None:
                stop_process(pipeline)


def main(argv: list[str] | None = None) -> int:
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
    args = p.parse_args(argv)
    r = measure(
        dns=args.dns,
        tps=args.tps,
        seconds=args.seconds,
        heartbeat_ms=args.heartbeat_ms,
        workers=args.workers,
        transfers=args.transfers,
        cn_processes=args.cn_processes,
    )
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
    if r.achieved_tps < 0.95 * r.target_tps:
        print(
            f"  NOTE: the CN did not reach the target rate on this machine: the latency below is"
            f" at {r.achieved_tps:,.0f} TPS, not {r.target_tps:,.0f}"
        )
    print(
        f"  commit -> CTS mark at a dump client: p50 {r.p50_ms:.0f} ms  p90 {r.p90_ms:.0f} ms"
        f"  p99 {r.p99_ms:.0f} ms  max {r.max_ms:.0f} ms   ({r.counted:,} transactions after"
        f" {WARMUP_S:.0f} s warm-up, {r.missing} never seen)"
    )
    print(
        f"  CN transaction (start -> commit returned): p50 {r.txn_p50_ms:.0f} ms"
        f"  p99 {r.txn_p99_ms:.0f} ms"
    )
    if args.heartbeat_ms != 200:
        goal = f"not measured (heartbeats every {args.heartbeat_ms} ms)"
    elif r.achieved_tps < 0.95 * 2000:
        goal = f"not measured at 2,000 TPS (the CN reached {r.achieved_tps:,.0f})"
    else:
        goal = "met" if r.p99_ms <= 250 else "not met"
    print(f"  goal p99 <= 250 ms at 2,000 TPS with 200 ms heartbeats: {goal}")
    return 0 if r.missing == 0 else 1
