"""`cdc bench snapshot-isolation`: do snapshot reads slow the pipeline down? The global binlog's
growth under a steady transfer load, without and then with 4 clients reading a whole logical
table (`SELECT * FROM bank.accounts`, the table the load writes: every read reconciles from the
binlog) in a loop, side by side in one run on one pipeline (`cdc bench hostile`'s phases; issue
32 item 5). Goal: with / without >= 0.95.

The reads take no DN lock (consistent reads, docs/snapshot-reads.md) and run in the serving
process, not the leader's (docs/dumper.md, "Serving cannot stall writing"): what they share with
writing is the DNs' and the machine's CPU."""

from __future__ import annotations

import argparse

from bench.goals import Figures
from bench.hostile import HostileSet, describe, measure_sets


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench snapshot-isolation", description=__doc__)
    p.add_argument("--seconds", type=float, default=15, help="per phase")
    p.add_argument("--tps", type=float, default=300, help="target CN transactions/s")
    p.add_argument("--readers", type=int, default=4, help="clients reading the table in a loop")
    p.add_argument("--dns", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="2 s per phase at 100 TPS")
    p.add_argument(
        "--as-of",
        action="store_true",
        help="the readers read AS OF the binlog's end before the first phase (an old point, "
        "older with every read: issue 42 item 6)",
    )
    p.add_argument(
        "--and-hostile",
        action="store_true",
        help="then `cdc bench hostile`'s clients (1 MB queries) in a third phase on the same"
        " cluster, compared with the same phase without clients, printed as a `== hostile:`"
        " section (`cdc bench all --quick`: one cluster for both benches)",
    )
    args = p.parse_args(argv)
    seconds, tps = (2.0, 100.0) if args.quick else (args.seconds, args.tps)
    spec = HostileSet(
        heartbeat_dumps=0,
        stalled_dumps=0,
        query_mb=0,
        query_loops=0,
        binlog_events_loops=0,
        binlog_events_stalled=0,
        table_readers=args.readers,
        as_of=args.as_of,
    )
    hostile = HostileSet(query_mb=1.0)
    old = " AS OF the binlog's end before the first phase" if args.as_of else ""
    print(
        f"snapshot isolation bench: {args.dns} DNs, transfers at {tps:g} TPS target for"
        f" {seconds:g} s per phase; {args.readers} clients reading {spec.table} whole{old} in a"
        " loop"
    )
    specs = [spec, hostile] if args.and_hostile else [spec]
    without, withs = measure_sets(seconds=seconds, tps=tps, dns=args.dns, specs=specs)
    lines = describe(
        "snapshot reads as of an old point" if args.as_of else "snapshot reads",
        without,
        withs[0],
        figures,
        "snapshot-isolation",
        "table readers",
    )
    print("\n".join(lines), flush=True)
    if args.and_hostile:
        print(
            "\n== hostile: on the snapshot-isolation bench's cluster, against its phase without"
            f" clients\nhostile clients: {hostile.clients()}"
        )
        lines = describe("server in its own process", without, withs[1], figures)
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
