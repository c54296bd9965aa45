"""`cdc bench writer|all`: benchmarks that print ratios measured side by side in one run."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (each prints its ratio against a baseline)")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    writer = bsub.add_parser(
        "writer", help="binlog_writer vs a plain buffered write of the same bytes"
    )
    writer.add_argument(
        "args", nargs=argparse.REMAINDER, help="passed on (--txns --rows --row-bytes --fsync)"
    )
    writer.set_defaults(func=cmd_writer)
    every = bsub.add_parser("all", help="every benchmark, with its defaults")
    every.set_defaults(func=cmd_all)


def cmd_writer(args) -> int:
    from binlog_writer.bench import main

    return main(args.args)


def cmd_all(args) -> int:
    from binlog_writer.bench import main

    print("== writer: small transactions (5 events)")
    main(["--txns", "50000"])
    print("\n== writer: 20 rows x 200 bytes per transaction")
    return main(["--txns", "10000", "--rows", "20", "--row-bytes", "200"])
