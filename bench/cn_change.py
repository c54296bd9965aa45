"""`cdc bench cn-change`: how long writes pause while the catalogue changes under load.

Two CN processes to the GMS (two `ComputeNode`s, each its own member, lease and gate): one runs
the transfer workload, the other runs logical DDL on the same table and then adds a DN, which
moves partitions to it one cluster change each. A transaction that meets a frozen partition
waits; its commit latency is the stall it saw. Printed: the transactions' latency without any
change (p99, max), and per DDL and per partition move the longest latency of a transaction
running during it; the ratio line is the longest stall over the p99 without changes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import time
from dataclasses import dataclass, field

from bench.goals import Figures
from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.local_cluster.testing import scratch_cluster

DDL = (
    "ALTER TABLE bank.accounts ADD COLUMN note VARCHAR(20) NULL",
    "ALTER TABLE bank.accounts DROP COLUMN note",
)


@dataclass(slots=True)
class Load:
    """Transactions' (start, end) times, monotonic."""

    spans: list[tuple[float, float]] = field(default_factory=list)
    stop: bool = False

    async def worker(self, workload: TransferWorkload, seed: int) -> None:
        rng = random.Random(seed)
        while not self.stop:
            began = time.monotonic()
            await workload.step(rng)
            self.spans.append((began, time.monotonic()))

    def longest(self, start: float, end: float) -> float:
        """The longest transaction that ran during [start, end]."""
        return max((e - s for s, e in self.spans if e >= start and s <= end), default=0.0)


async def run(cluster, accounts: int, workers: int, baseline_s: float, rounds: int) -> int:
    cfg = cluster.config()
    await init(cfg)
    writer = ComputeNode(cfg)
    await writer.start(recover=False)
    load = Load()
    try:
        workload = TransferWorkload(writer, accounts=accounts)
        await workload.setup()
        tasks = [asyncio.create_task(load.worker(workload, i)) for i in range(workers)]
        await asyncio.sleep(baseline_s)
        quiet = sorted(e - s for s, e in load.spans)
        p99, quiet_max = quiet[int(len(quiet) * 0.99)], quiet[-1]
        cluster.add_dn()  # a DN process for the scale-out below, started before the changer
        changer = ComputeNode(cluster.config())
        await changer.start(recover=False)
        ddl_stalls, move_stalls = [], []
        try:
            for i in range(rounds * len(DDL)):
                began = time.monotonic()
                await changer.execute_ddl(DDL[i % len(DDL)])
                ddl_stalls.append((time.monotonic() - began, load.longest(began, time.monotonic())))
                await asyncio.sleep(0.3)
            windows: dict[str, float] = {}

            def progress(line: str) -> None:
                what = line.split(":", 1)[0]
                if what.startswith("move ") and what not in windows:
                    windows[what] = time.monotonic()

            result = await changer.add_dn(4, progress)
            ends = sorted(windows.values())[1:] + [time.monotonic()]
            for began, end in zip(sorted(windows.values()), ends, strict=True):
                move_stalls.append((end - began, load.longest(began, end)))
        finally:
            await changer.close()
        await asyncio.sleep(0.5)
        load.stop = True
        await asyncio.gather(*tasks)
        count, total = await workload.totals()
    finally:
        await writer.close()
    print(
        f"CN change bench: transfer load ({workers} workers, {accounts} accounts) in one CN "
        f"process; DDL and add-dn from another; {len(load.spans):,} transactions"
    )
    print(f"  no change:  txn latency p99 {p99 * 1000:7.1f} ms, max {quiet_max * 1000:7.1f} ms")
    for what, stalls in (("DDL", ddl_stalls), ("move", move_stalls)):
        for took, stall in stalls:
            print(
                f"  {what:5} took {took * 1000:7.1f} ms; longest txn during it {stall * 1000:7.1f} ms"
            )
    print(f"  moved {len(result.moved)} partition(s) to DN 4; accounts {count}, total {total}")
    worst = max(s for _, s in ddl_stalls + move_stalls)
    ok = total == workload.expected_total
    print(f"  total balance {'unchanged' if ok else 'CHANGED'}")
    print(
        f"ratio  longest write stall / p99 without change: {worst / p99:.1f}x "
        f"(DDL {max(s for _, s in ddl_stalls) * 1000:.0f} ms, "
        f"move {max((s for _, s in move_stalls), default=0) * 1000:.0f} ms)"
    )
    return 0 if ok else 1


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    """`figures`: nothing kept (no goal for this bench's figures)."""
    p = argparse.ArgumentParser(prog="cdc bench cn-change", description=__doc__)
    p.add_argument("--accounts", type=int, default=2000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--baseline", type=float, default=5.0, help="seconds of load without change")
    p.add_argument("--rounds", type=int, default=3, help="ADD + DROP COLUMN pairs")
    args = p.parse_args(argv)
    logging.getLogger("cdc_equipment.cn").setLevel(
        logging.WARNING
    )  # no progress lines in the table
    with scratch_cluster("cdc-bench-cn-change-", 3) as (_, cluster):
        return asyncio.run(run(cluster, args.accounts, args.workers, args.baseline, args.rounds))
