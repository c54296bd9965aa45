"""`cdc backfill --tso T|latest --out DIR`: a consistent snapshot of the logical tables at TSO T
on Spark, with the global binlog position to continue from (docs/backfill.md)."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from cdc.config import ConfigError, load
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "backfill", help="snapshot of the logical tables at a TSO (Spark), + binlog position"
    )
    p.add_argument("--tso", required=True, help="a TSO, or `latest`")
    p.add_argument("--out", required=True, type=Path, help="new directory for the dataset")
    p.add_argument("--tables", help="db.table,... (default: every logical table)")
    p.add_argument("--format", default="parquet", choices=("parquet", "csv"))
    p.add_argument("--master", default="local[2]", help="Spark master (local[N], spark://...)")
    p.add_argument("--chunk-rows", type=int, default=200_000, help="rows per read (and part)")
    p.add_argument("--load", metavar="mysql://user:pass@host:port", help="load it there too")
    p.add_argument("--dumper", metavar="HOST:PORT", help="default: the [dumper] of cdc.toml")
    p.add_argument("--user", default=None, help="dumper user (default: the cluster's repl user)")
    p.add_argument("--password", default=None)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the binlog")
    add_config_argument(p)
    p.set_defaults(func=cmd_backfill)


def parse_tso(text: str) -> int | None:
    if text == "latest":
        return None
    if not text.isdigit():
        raise ConfigError(f"--tso must be a TSO (an integer) or `latest`, got {text!r}")
    return int(text)


def cmd_backfill(args) -> int:
    from backfill import BackfillError, Options, run
    from backfill.global_binlog import Dumper
    from backfill.load import change_master
    from backfill.load import load as load_into
    from cdc_cli.commands.check import parse_address
    from cdc_equipment.cn import connect
    from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER

    config = load(args.config)
    host, port = parse_address(args.dumper or f"{config.dumper.host}:{config.dumper.port}")
    user = args.user or DEFAULT_USER
    password = args.password if args.password is not None else DEFAULT_PASSWORD
    opts = Options(
        out=args.out,
        dumper=Dumper(host, port, user, password),
        tso=parse_tso(args.tso),
        tables=[t for t in (args.tables or "").split(",") if t] or None,
        fmt=args.format,
        master=args.master,
        chunk_rows=args.chunk_rows,
        timeout=args.timeout,
    )
    try:
        manifest = run(config, opts, partial(connect, config))
        print(f"snapshot at TSO {manifest.tso} in {args.out}")
        for t in manifest.tables:
            print(f"  {t.db}.{t.table}: {t.rows} rows")
        print(f"global binlog continues at {manifest.binlog_file}:{manifest.binlog_position}")
        if args.load:
            loaded = load_into(args.out, args.load)
            print(f"loaded {sum(loaded.values())} rows into {args.load.rpartition('@')[2]}")
        print(change_master(manifest, user, password) + ";")
    except BackfillError as exc:
        print(f"cdc: error: {exc}", file=sys.stderr)
        return 1
    return 0
