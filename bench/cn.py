"""`cdc bench cn`: CN throughput with its round trips batched (`cn.batch_round_trips`, the
default: XA START with the first statement, XA END with XA PREPARE, commit records of concurrent
transactions in one INSERT) vs one statement per round trip, on uvloop vs asyncio's own loop,
and with the updates deferred (`Transaction.defer`: sent with XA END + XA PREPARE), side by
side on one throw-away cluster; and the CPU each transaction costs the CN process and the
MariaDB servers (which bounds the rate on a given machine)."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from bench.goals import Figures
from cdc_equipment.cn.workloads.steady import prepare, process_cpu_s, run_fast, steady_load
from cdc_equipment.local_cluster.testing import scratch_cluster


@dataclass(slots=True)
class Round:
    mode: str
    tps: float
    cn_us: float  # CN process CPU per transaction (µs)
    servers_us: float  # DNs + GMS CPU per transaction (µs)
    p50_ms: float


# (label, cn.batch_round_trips, uvloop, Transaction.defer): the CN before this bench's
# changes, then each step.
MODES = [
    ("one per trip, asyncio", False, False, False),
    ("batched, asyncio", True, False, False),
    ("batched, uvloop", True, True, False),
    ("batched+defer, uvloop", True, True, True),
]


def run_round(cfg, cluster, mode, seconds: float, workers: int, transfers: float) -> Round:
    label, cfg.cn.batch_round_trips, uvloop, defer = mode
    pids = [p for p in (srv.pid() for srv in cluster.servers()) if p]
    servers = sum(process_cpu_s(p) for p in pids)
    load = run_fast(steady_load(cfg, None, seconds, workers, transfers, defer=defer), uvloop)
    servers = sum(process_cpu_s(p) for p in pids) - servers
    n = max(len(load.commits), 1)
    durations = sorted(load.durations) or [float("nan")]
    return Round(
        label,
        len(load.commits) / load.elapsed_s,
        load.cpu_s / n * 1e6,
        servers / n * 1e6,
        durations[len(durations) // 2],
    )


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    """`figures`: nothing kept (no goal for this bench's figures)."""
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
            for mode in MODES:
                rounds.append(
                    run_round(cfg, cluster, mode, args.seconds, args.workers, args.transfers)
                )
                time.sleep(0.5)
    print(
        f"CN bench: {args.dns} DNs, one CN process x {args.workers} workers, unthrottled,"
        f" {args.transfers:.0%} two-row transactions, {args.seconds:.0f} s per round"
    )
    for r in rounds:
        print(
            f"  {r.mode:22} {r.tps:7,.0f} TPS  txn p50 {r.p50_ms:5.1f} ms  CPU per txn: CN"
            f" {r.cn_us:5.0f} us, DNs+GMS {r.servers_us:5.0f} us"
        )

    def mean(label: str, attr: str) -> float:
        values = [getattr(r, attr) for r in rounds if r.mode == label]
        return sum(values) / len(values)

    base = MODES[0][0]
    for label, *_ in MODES[1:]:
        print(
            f"  {label} / {base}: TPS x{mean(label, 'tps') / mean(base, 'tps'):.2f},"
            f" CN CPU per txn x{mean(label, 'cn_us') / mean(base, 'cn_us'):.2f}"
        )
    last, before = MODES[-1][0], MODES[-2][0]
    print(
        f"  {last} / {before}: TPS x{mean(last, 'tps') / mean(before, 'tps'):.2f},"
        f" CN CPU per txn x{mean(last, 'cn_us') / mean(before, 'cn_us'):.2f}"
    )
    best = MODES[-1][0]
    total = mean(best, "cn_us") + mean(best, "servers_us")
    print(
        f"  {best}: CN + servers {total:,.0f} us of CPU per txn: at most {2e6 / total:,.0f} TPS"
        f" on 2 idle cores, before the pipeline's share"
    )
    return 0
