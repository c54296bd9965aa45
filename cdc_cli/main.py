"""The `cdc` command line: one sub-command group per module in `cdc_cli/commands/`.

The CLI is the top of the dependency graph, not a library: it may import every package (the
stages lazily, inside the command that needs them), and nothing imports it
(tests/test_layout.py). `python -m cdc_cli.main` is the `cdc` command.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings

import pymysql

from cdc.cn_protocol.errors import CnError
from cdc.config import ConfigError
from cdc_cli.commands import backfill as backfill_cmd
from cdc_cli.commands import bench as bench_cmd
from cdc_cli.commands import check as check_cmd
from cdc_cli.commands import cluster as cluster_cmd
from cdc_cli.commands import cn as cn_cmd
from cdc_cli.commands import demo as demo_cmd
from cdc_cli.commands import flashback as flashback_cmd
from cdc_cli.commands import ha as ha_cmd
from cdc_cli.commands import locate as locate_cmd
from cdc_cli.commands import pipeline as pipeline_cmd
from cdc_cli.commands import preflight as preflight_cmd
from cdc_cli.commands import stream as stream_cmd
from cdc_cli.commands import verify as verify_cmd
from cdc_cli.commands import workload as workload_cmd
from cdc_equipment.local_cluster import ClusterError, ServerError

# User-facing failures: printed as one line, exit code 1. Anything else is a bug: traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ClusterError,
    ServerError,
    ConfigError,
    CnError,
    TimeoutError,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cdc", description="Global binlog server for a sharded MariaDB cluster."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (
        cluster_cmd,
        cn_cmd,
        workload_cmd,
        pipeline_cmd,
        preflight_cmd,
        ha_cmd,
        stream_cmd,
        check_cmd,
        verify_cmd,
        locate_cmd,
        flashback_cmd,
        backfill_cmd,
        bench_cmd,
        demo_cmd,
    ):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # "Table already exists" notes of idempotent CREATE ... IF NOT EXISTS: not for users' eyes.
    warnings.filterwarnings("ignore", category=pymysql.Warning)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except USER_ERRORS as exc:
        print(f"cdc: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
