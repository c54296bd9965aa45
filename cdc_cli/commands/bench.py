"""`cdc bench writer|dumper|fanout|merge-source|pipeline|latency|hostile|cn|cn-change|scale|streams|snapshot|as-of|snapshot-isolation|all`: benchmarks
that print ratios measured side by side in one run, each beside its goal (bench/goals.py); `all`
ends with a summary of every figure against its goal."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (each prints its ratio against a baseline)")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    writer = bsub.add_parser(
        "writer", help="binlog_writer vs a plain buffered write of the same bytes"
    )
    writer.add_argument("--txns", type=int, default=100_000)
    writer.add_argument("--rows", type=int, default=1, help="rows per transaction")
    writer.add_argument("--row-bytes", type=int, default=100)
    writer.add_argument("--fsync", default="never", help="txn | never | group:N | interval:MS")
    writer.set_defaults(func=cmd_writer)
    dumper = bsub.add_parser(
        "dumper", help="mariadb-binlog --raw from our dumper vs from mariadbd, same file"
    )
    dumper.add_argument("--mb", type=int, default=50, help="binlog size in MB")
    dumper.add_argument("--rounds", type=int, default=3)
    dumper.set_defaults(func=cmd_dumper)
    fanout = bsub.add_parser(
        "fanout", help="1, 16, 64 concurrent mariadb-binlog --raw: our dumper vs mariadbd"
    )
    fanout.add_argument("--mb", type=int, default=26, help="binlog size in MB")
    fanout.add_argument("--clients", default="1,16,64", help="widths, comma-separated")
    fanout.add_argument("--rounds", type=int, default=2)
    fanout.add_argument("--quick", action="store_true", help="2 MB, 1 and 4 clients")
    fanout.set_defaults(func=cmd_fanout)
    source = bsub.add_parser(
        "merge-source", help="one MergeSource vs mariadb-binlog --raw of the same DN binlog"
    )
    source.add_argument("--events", type=int, default=1_000_000)
    source.add_argument("--rounds", type=int, default=2)
    source.set_defaults(func=cmd_merge_source)
    pipe = bsub.add_parser(
        "pipeline", help="catch-up of the whole pipeline vs mariadb-binlog --raw of the DN binlogs"
    )
    pipe.add_argument("--dns", type=int, default=3)
    amount = pipe.add_mutually_exclusive_group()
    amount.add_argument("--events", type=int, default=1_000_000, help="DN events to generate")
    amount.add_argument("--seconds", type=float, help="or: transfers for this many seconds")
    pipe.add_argument("--threads", type=int, default=8)
    pipe.add_argument("--repeat", type=int, default=1, help="catch-ups over the same DN binlogs")
    pipe.add_argument("--keep", help="keep the cluster and its traffic here; reuse them next time")
    pipe.add_argument("--in-process", action="store_true", help="also with MergeSources in-process")
    pipe.add_argument("--profile", help="save a cProfile of the catch-up to this file")
    pipe.set_defaults(func=cmd_pipeline)
    backfill = bsub.add_parser(
        "backfill", help="Spark backfill vs a plain SELECT * dump of the same shards"
    )
    backfill.add_argument("--rows", type=int, default=10_000_000)
    backfill.add_argument("--chunk-rows", type=int, default=200_000)
    backfill.add_argument(
        "--warm", action="store_true", help="Spark started before the timing (not the goal)"
    )
    backfill.set_defaults(func=cmd_backfill)
    snapshot = bsub.add_parser(
        "snapshot", help="SELECT * through the dumper (as of a position) vs the shards directly"
    )
    snapshot.add_argument("--rows", type=int, default=1_000_000)
    snapshot.add_argument("--rounds", type=int, default=2)
    snapshot.add_argument("--change", type=float, default=0.05, help="share of keys changed")
    snapshot.add_argument("--quick", action="store_true", help="20,000 rows, one round")
    snapshot.set_defaults(func=cmd_snapshot)
    as_of = bsub.add_parser(
        "as-of", help="SELECT * through the dumper as of an old point vs at the end, same run"
    )
    as_of.add_argument("--rows", type=int, default=300_000)
    as_of.add_argument("--traffic", type=int, default=600, help="CN transactions after the point")
    as_of.add_argument("--rounds", type=int, default=2)
    as_of.add_argument(
        "--hour", action="store_true", help="an hour of the demo's row changes after the point"
    )
    as_of.add_argument("--hot", type=int, default=0, help="the traffic's keys: the first N only")
    as_of.add_argument("--quick", action="store_true", help="20,000 rows, 50 transactions")
    as_of.set_defaults(func=cmd_as_of)
    latency = bsub.add_parser(
        "latency", help="CN commit -> visible to a dump client of the dumper, at a steady TPS"
    )
    latency.add_argument("--tps", type=float, default=2000)
    latency.add_argument("--seconds", type=float, default=20)
    latency.add_argument("--dns", type=int, default=3)
    latency.add_argument("--heartbeat-ms", type=int, default=200)
    latency.add_argument("--workers", type=int, default=16, help="per CN process")
    latency.add_argument("--cn-processes", type=int, default=2)
    latency.add_argument("--transfers", type=float, default=0.2)
    latency.add_argument(
        "--ha", action="store_true", help="leader + follower: the cost of acknowledged serving"
    )
    latency.add_argument("--no-stages", action="store_true", help="no per-stage breakdown")
    latency.set_defaults(func=cmd_latency)
    scale = bsub.add_parser("scale", help="pipeline catch-up throughput on 2, 4 and 8 DNs")
    scale.add_argument("--dns", default="2,4,8")
    scale.add_argument("--events", type=int, default=100_000)
    scale.add_argument("--threads", type=int, default=8)
    scale.set_defaults(func=cmd_scale)
    streams = bsub.add_parser(
        "streams", help="catch-up into 1, 2 and 4 streams: time, events/s, CPU per DN event"
    )
    streams.add_argument("--streams", default="1,2,4")
    streams.add_argument("--dns", type=int, default=3)
    streams.add_argument("--events", type=int, default=300_000)
    streams.add_argument("--keep", help="keep the cluster and its traffic in this directory")
    streams.add_argument("--repeat", type=int, default=1, help="runs per count; the least counts")
    streams.set_defaults(func=cmd_streams)
    big = bsub.add_parser(
        "big-txn", help="one huge CN transaction through the pipeline: time and peak RSS"
    )
    big.add_argument("--mb", type=int, default=1024)
    big.add_argument("--dns", type=int, default=2)
    big.add_argument("--spill-mb", type=int, default=64)
    big.set_defaults(func=cmd_big_txn)
    cn = bsub.add_parser(
        "cn", help="CN throughput: XA statements batched vs one per round trip, CPU per txn"
    )
    cn.add_argument("--dns", type=int, default=3)
    cn.add_argument("--seconds", type=float, default=10)
    cn.add_argument("--rounds", type=int, default=2)
    cn.add_argument("--workers", type=int, default=32)
    cn.set_defaults(func=cmd_cn)
    change = bsub.add_parser(
        "cn-change", help="longest write stall per DDL and per partition move under load"
    )
    change.add_argument("--accounts", type=int, default=2000)
    change.add_argument("--workers", type=int, default=8)
    change.add_argument("--baseline", type=float, default=5.0)
    change.add_argument("--rounds", type=int, default=3)
    change.set_defaults(func=cmd_cn_change)
    hostile = bsub.add_parser(
        "hostile", help="global binlog growth under load with / without hostile dumper clients"
    )
    hostile.add_argument("--seconds", type=float, default=15, help="per phase")
    hostile.add_argument("--tps", type=float, default=300)
    hostile.add_argument("--dns", type=int, default=2)
    hostile.add_argument("--query-mb", type=float, default=2.0)
    hostile.add_argument(
        "--in-process", action="store_true", help="also with the server on the leader's loop"
    )
    hostile.set_defaults(func=cmd_hostile)
    isolation = bsub.add_parser(
        "snapshot-isolation",
        help="global binlog growth under load with / without 4 clients reading whole tables",
    )
    isolation.add_argument("--seconds", type=float, default=15, help="per phase")
    isolation.add_argument("--tps", type=float, default=300)
    isolation.add_argument("--readers", type=int, default=4)
    isolation.add_argument("--dns", type=int, default=2)
    isolation.add_argument("--quick", action="store_true", help="2 s per phase at 100 TPS")
    isolation.add_argument(
        "--as-of", action="store_true", help="the readers read AS OF an old point"
    )
    isolation.add_argument(
        "--and-hostile",
        action="store_true",
        help="then `hostile`'s clients in a third phase on the same cluster (a `== hostile:`"
        " section)",
    )
    isolation.set_defaults(func=cmd_snapshot_isolation)
    every = bsub.add_parser(
        "all", help="every benchmark, with its defaults; then each figure beside its goal"
    )
    every.add_argument(
        "--quick", action="store_true", help="each at a small size (a check that all run here)"
    )
    every.set_defaults(func=cmd_all)
    for parser in bsub.choices.values():
        parser.set_defaults(func=_from_a_checkout(parser.get_default("func")))


def _from_a_checkout(cmd):
    """`cmd` once `bench` imports: the benchmarks are not installed (pyproject.toml packages:
    they run from a checkout, docs/development.md "Packaging"), so where the installed CLI is a
    checkout's own (editable), bench/ is found beside cdc_cli/."""

    def run(args) -> int:
        if importlib.util.find_spec("bench") is None:
            checkout = Path(__file__).resolve().parents[2]
            if not (checkout / "bench" / "__init__.py").is_file():
                raise SystemExit(
                    "cdc bench: the benchmarks are not installed with the package; run them from"
                    " a checkout of the repository (`make setup`, then `.venv/bin/cdc bench ...`)"
                )
            sys.path.append(str(checkout))
        return cmd(args)

    return run


def cmd_writer(args) -> int:
    from bench.writer import main

    return main(
        [
            "--txns",
            str(args.txns),
            "--rows",
            str(args.rows),
            "--row-bytes",
            str(args.row_bytes),
            "--fsync",
            args.fsync,
        ]
    )


def cmd_dumper(args) -> int:
    from bench.dumper import main

    return main(["--mb", str(args.mb), "--rounds", str(args.rounds)])


def cmd_fanout(args) -> int:
    from bench.fanout import main

    return main(forward(args, "mb", "clients", "rounds") + (["--quick"] if args.quick else []))


def cmd_merge_source(args) -> int:
    from bench.merge_source import main

    return main(["--events", str(args.events), "--rounds", str(args.rounds)])


def cmd_pipeline(args) -> int:
    from bench.pipeline import main

    amount = ["--seconds", str(args.seconds)] if args.seconds else ["--events", str(args.events)]
    argv = ["--dns", str(args.dns), *amount, "--threads", str(args.threads)]
    argv += ["--repeat", str(args.repeat)] + (["--in-process"] if args.in_process else [])
    argv += ["--keep", args.keep] if args.keep else []
    return main(argv + (["--profile", args.profile] if args.profile else []))


def forward(args, *names: str) -> list[str]:
    """`--name=value` options for a bench's own parser, from ours."""
    return [f"--{n.replace('_', '-')}={getattr(args, n)}" for n in names]


def cmd_latency(args) -> int:
    from bench.latency import main

    return main(
        forward(
            args, "tps", "seconds", "dns", "heartbeat_ms", "workers", "transfers", "cn_processes"
        )
        + (["--ha"] if args.ha else [])
        + (["--no-stages"] if args.no_stages else [])
    )


def cmd_cn(args) -> int:
    from bench.cn import main

    return main(forward(args, "dns", "seconds", "rounds", "workers"))


def cmd_cn_change(args) -> int:
    from bench.cn_change import main

    return main(forward(args, "accounts", "workers", "baseline", "rounds"))


def cmd_backfill(args) -> int:
    from bench.backfill import main

    warm = ["--warm"] if args.warm else []
    return main(["--rows", str(args.rows), "--chunk-rows", str(args.chunk_rows), *warm])


def cmd_snapshot(args) -> int:
    from bench.snapshot import main

    return main(forward(args, "rows", "rounds", "change") + (["--quick"] if args.quick else []))


def cmd_as_of(args) -> int:
    from bench.as_of import main

    argv = forward(args, "rows", "traffic", "rounds", "hot") + (["--quick"] if args.quick else [])
    return main(argv + (["--hour"] if args.hour else []))


def cmd_snapshot_isolation(args) -> int:
    from bench.snapshot_isolation import main

    argv = forward(args, "seconds", "tps", "readers", "dns")
    argv += ["--quick"] if args.quick else []
    argv += ["--as-of"] if args.as_of else []
    return main(argv + (["--and-hostile"] if args.and_hostile else []))


def cmd_scale(args) -> int:
    from bench.scale import main

    return main([f"--dns={args.dns}", f"--events={args.events}", f"--threads={args.threads}"])


def cmd_streams(args) -> int:
    from bench.streams import main

    argv = [f"--streams={args.streams}", f"--dns={args.dns}", f"--events={args.events}"]
    argv.append(f"--repeat={args.repeat}")
    return main(argv + ([f"--keep={args.keep}"] if args.keep else []))


def cmd_big_txn(args) -> int:
    from bench.big_txn import main

    return main([f"--mb={args.mb}", f"--dns={args.dns}", f"--spill-mb={args.spill_mb}"])


def cmd_hostile(args) -> int:
    from bench.hostile import main

    argv = forward(args, "seconds", "tps", "dns", "query_mb")
    return main(argv + (["--in-process"] if args.in_process else []))


def cmd_all(args) -> int:
    from bench.as_of import main as as_of
    from bench.backfill import main as backfill
    from bench.big_txn import main as big_txn
    from bench.cn import main as cn
    from bench.cn_change import main as cn_change
    from bench.dumper import main as dumper
    from bench.fanout import main as fanout
    from bench.goals import BenchRun, Figures, summary
    from bench.hostile import main as hostile
    from bench.latency import main as latency
    from bench.merge_source import main as merge_source
    from bench.pipeline import main as pipeline
    from bench.scale import main as scale
    from bench.snapshot import main as snapshot
    from bench.snapshot_isolation import main as snapshot_isolation
    from bench.streams import main as streams
    from bench.writer import main as writer

    # (title, bench, its arguments, its arguments with --quick: every bench runs, and prints
    # its ratio, at a size that takes seconds; the figures need the full size).
    runs = [
        ("writer: small transactions (5 events)", writer, ["--txns=50000"], ["--txns=5000"]),
        (
            "writer: 20 rows x 200 bytes per transaction",
            writer,
            ["--txns=10000", "--rows=20", "--row-bytes=200"],
            ["--txns=1000", "--rows=20", "--row-bytes=200"],
        ),
        ("dumper", dumper, [], ["--mb=2", "--rounds=1"]),
        ("fanout", fanout, [], ["--quick"]),
        ("merge-source", merge_source, [], ["--events=10000", "--rounds=1"]),
        ("pipeline", pipeline, [], ["--events=10000", "--dns=2"]),
        ("backfill", backfill, [], ["--rows=10000", "--chunk-rows=4000"]),
        ("snapshot", snapshot, [], ["--quick"]),
        ("as-of", as_of, [], ["--quick"]),
        # --quick: and hostile's clients on the same cluster, against the same phase without
        # clients (one cluster less; it prints the `hostile` section).
        ("snapshot-isolation", snapshot_isolation, [], ["--quick", "--and-hostile"]),
        (
            "latency",
            latency,
            [],
            ["--tps=100", "--seconds=2", "--workers=4", "--cn-processes=1", "--dns=2"],
        ),
        ("cn", cn, [], ["--seconds=1", "--rounds=1", "--workers=4", "--dns=2"]),
        (
            "cn-change",
            cn_change,
            [],
            ["--accounts=200", "--workers=4", "--baseline=1", "--rounds=1"],
        ),
        ("scale", scale, [], ["--dns=2,3", "--events=2000"]),
        ("streams", streams, [], ["--streams=1,2", "--dns=2", "--events=3000"]),
        ("hostile", hostile, [], None),  # --quick: in snapshot-isolation's run
        ("big-txn (1 GB; --quick: 16 MB)", big_txn, [], ["--mb=16"]),
    ]
    done: list[BenchRun] = []
    for title, bench, full, quick in runs:
        if args.quick and quick is None:
            continue
        print(f"\n== {title}", flush=True)
        figures = Figures()
        try:
            failed = bool(bench(quick if args.quick else full, figures))
        except Exception:  # the others still run; the summary and the exit status say it
            traceback.print_exc()
            failed = True
        done.append(BenchRun(title, figures, failed))
    # Every figure beside its goal, once all ran (bench/goals.py).
    print("\n== summary: each figure beside its goal (bench/goals.py)")
    print(summary(done), flush=True)
    failed = [run.title for run in done if run.failed]
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0
