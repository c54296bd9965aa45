"""`cdc bench cn`: CN throughput with its round trips batched (`cn.batch_round_trips`, the
default: XA START with the first statement, XA END with XA PREPARE, commit records of concurrent
transactions in one INSERT) vs one statement per round trip, side by side on one throw-away
cluster, and the CPU each transaction costs the CN process and the MariaDB servers (which bounds
the rate on a given machine)."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from cdc.cluster.testing import scratch_cluster
from cdc.cn.workloads.steady import prepare, process_cpu_s, steady_load


@dataclass(slots=True)
class Round:
    batch_round_trips: bool
    tps: float
    cn_us: float  # CN process CPU per transaction (µs)
    servers_us: float  # DNs + GMS CPU per transaction (µs)
    p50_ms: float


def run_round(
    cfg, cluster, batch_round_trips: bool, seconds: float, workers: int, transfers: float
):
    cfg.cn.batch_round_trips = batch_round_trips
    pids = [p for p in (srv.pid() for srv in cluster.servers()) if p]
    servers = sum(process_cpu_s(p) for p in pids)
    load = asyncio.run(steady_load(cfg, None, seconds, workers, transfers))
    servers = sum(process_cpu_s(p) for p in pids) - servers
    n = max(len(load.commits), 1)
    durations = sorted(load.durations) or [float("nan")]
    return Round(
        batch_round_trips,
        len(load.commits) / load.elapsed_s,
        load.cpu_s / n * 1e6,
        servers / n * 1e6,
        durations[len(durations) // 2],
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cdc bench cn", description=__doc__)
    p.add_argument("--dns", type=int, default=3)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--rounds", type=int, default=2, help="rounds of each mode, alternating")
    p.add_argument("--workers", type=int, default=32)
    p.add_argument("--transfers", type=float, default=0.2, help="fraction of two-row txns")
    args = p.parse_args(argv)
    rounds: list[Round] = []
    with scratch_cluster("cdc-bench-cn-", args.dns) as (_, cluster):
        cfg = cluster.config()
        asyncio.run(prepare(cfg))
        for _ in range(args.rounds):
            for batch_round_trips in (False, True):
                rounds.append(
                    run_round(
                        cfg, cluster, batch_round_trips, args.seconds, args.workers, args.transfers
                    )
                )
                time.sleep(0.5)
    print(
        f"CN bench: {args.dns} DNs, one CN process x {args.workers} workers, unthrottled,"
        f" {args.transfers:.0%} two-row transactions, {args.seconds:.0f} s per round"
    )
    for r in rounds:
        mode = "batched     " if r.batch_round_trips else "one per trip"
        print(
            f"  {mode} {r.tps:7,.0f} TPS  txn p50 {r.p50_ms:5.1f} ms  CPU per txn: CN"
            f" {r.cn_us:5.0f} us, DNs+GMS {r.servers_us:5.0f} us"
        )

    def mean(batch_round_trips: bool, attr: str) -> float:
        values = [getattr(r, attr) for r in rounds if r.batch_round_trips is batch_round_trips]
        return sum(values) / len(values)

    new, old = mean(True, "tps"), mean(False, "tps")
    cn_new, cn_old = mean(True, "cn_us"), mean(False, "cn_us")
    total = cn_new + mean(True, "servers_us")
    print(
        f"  batched / one per trip: TPS x{new / old:.2f}, CN CPU per txn x{cn_new / cn_old:.2f};"
        f" CN + servers {total:,.0f} us per txn: at most {2e6 / total:,.0f} TPS on 2 idle cores"
        f" before the pipeline's share"
    )
    return 0
