"""`cdc bench scale`: the pipeline's catch-up throughput (as `cdc bench pipeline` measures it) on
2, 4 and 8 DNs with the same amount of CN traffic, and the ratio of the largest to the smallest.

Each DN count gets a fresh cluster and the same number of CN transfers (two accounts, on two
DNs for most pairs), so the binlogs hold about the same effective events; what changes is how
many MergeSources feed the merge and how many fragments a transaction has.
"""

from __future__ import annotations

import argparse

from bench.goals import Figures
from bench.pipeline import measure

# Effective events per CN transfer: a table map and an update rows event per account.
EFFECTIVE_PER_TXN = 4


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench scale", description=__doc__)
    p.add_argument("--dns", default="2,4,8", help="DN counts, comma-separated (default 2,4,8)")
    p.add_argument(
        "--events",
        type=int,
        default=100_000,
        help="effective events to generate per DN count (default 100,000)",
    )
    p.add_argument("--threads", type=int, default=8)
    args = p.parse_args(argv)
    counts = [int(n) for n in args.dns.split(",")]
    transactions = max(1, args.events // EFFECTIVE_PER_TXN)
    print(f"scale bench: {transactions:,} CN transfers per DN count")
    print(
        f"  {'DNs':>4} {'DN binlogs':>11} {'raw dump':>9} {'catch-up':>9}"
        f" {'effective ev/s':>15} {'DN ev/s':>9} {'CPU':>7} {'vs raw':>7}"
        f" {'leader CPU':>10} {'sources CPU':>11} {'core wait':>9}"
    )
    results = []  # sources CPU: the MergeSource processes and the fork server they come from
    for dns in counts:
        r = measure(dns, transactions=transactions, threads=args.threads)
        results.append(r)
        print(
            f"  {r.dns:>4} {r.raw_bytes / 1e6:>8.1f} MB {r.raw_s:>7.2f} s {r.catch_up_s:>7.2f} s"
            f" {r.effective_per_s:>15,.0f} {r.dn_events_per_s:>9,.0f} {r.cpu_s:>5.2f} s"
            f" {r.ratio:>7.2f} {r.cpu.leader_s:>8.2f} s {r.cpu.sources_s + r.cpu.fork_server_s:>9.2f} s"
            f" {r.cpu.wait_s:>7.2f} s",
            flush=True,
        )
    first, last = results[0], results[-1]
    if len(results) > 1:
        # The goal is for 8 DNs against 2: other counts say nothing of it.
        other = "" if (first.dns, last.dns) == (2, 8) else f"ran {last.dns} DNs / {first.dns}"
        ratio = last.effective_per_s / first.effective_per_s
        verdict = figures.goal("scale", ratio, "effective events/s", other)
        print(f"  throughput {last.dns} DNs / {first.dns} DNs: {ratio:.2f} {verdict}")
        # The same by CPU per effective event, which other load on the machine barely moves:
        # what the ratio would be on idle cores, all else being equal.
        by_cpu = _cpu_per_event(first) / _cpu_per_event(last)
        verdict = figures.goal("scale", by_cpu, "by CPU per effective event", other)
        print(f"  by CPU per effective event (leader + MergeSources): {by_cpu:.2f} {verdict}")
    return 0


def _cpu_per_event(r) -> float:
    return (r.cpu.leader_s + r.cpu.sources_s + r.cpu.fork_server_s) / max(1, r.effective)
