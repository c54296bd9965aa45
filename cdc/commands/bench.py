"""`cdc bench writer|dumper|all`: benchmarks that print ratios measured side by side in one run."""

from __future__ import annotations

import argparse


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
    pipe.add_argument("--seconds", type=float, default=20)
    pipe.add_argument("--threads", type=int, default=8)
    pipe.set_defaults(func=cmd_pipeline)
    backfill = bsub.add_parser(
        "backfill", help="Spark backfill vs a plain SELECT * dump of the same shards"
    )
    backfill.add_argument("--rows", type=int, default=1_000_000)
    backfill.add_argument("--chunk-rows", type=int, default=50_000)
    backfill.set_defaults(func=cmd_backfill)
    every = bsub.add_parser("all", help="every benchmark, with its defaults")
    every.set_defaults(func=cmd_all)


def cmd_writer(args) -> int:
    from binlog_writer.bench import main

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
    from dumper.bench import main

    return main(["--mb", str(args.mb), "--rounds", str(args.rounds)])


def cmd_merge_source(args) -> int:
    from merge_source.bench import main

    return main(["--events", str(args.events), "--rounds", str(args.rounds)])


def cmd_pipeline(args) -> int:
    from dumper.bench_pipeline import main

    return main(
        ["--dns", str(args.dns), "--seconds", str(args.seconds), "--threads", str(args.threads)]
    )


def cmd_backfill(args) -> int:
    from backfill.bench import main

    return main(["--rows", str(args.rows), "--chunk-rows", str(args.chunk_rows)])


def cmd_all(args) -> int:
    from backfill.bench import main as backfill
    from binlog_writer.bench import main as writer
    from dumper.bench import main as dumper
    from dumper.bench_pipeline import main as pipeline
    from merge_source.bench import main as merge_source

    print("== writer: small transactions (5 events)")
    writer(["--txns", "50000"])
    print("\n== writer: 20 rows x 200 bytes per transaction")
    writer(["--txns", "10000", "--rows", "20", "--row-bytes", "200"])
    print("\n== dumper")
    dumper([])
    print("\n== merge-source")
    merge_source([])
    print("\n== pipeline")
    pipeline([])
    print("\n== backfill")
    return backfill([])
