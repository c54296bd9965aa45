"""`cdc check --downstream HOST:PORT`: compare a downstream of the global binlog with the
logical tables (token through the CN, per-table checksums, row diff on mismatch)."""

from __future__ import annotations

import argparse

from cdc.config import ConfigError, load
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="compare a downstream with the logical tables; exit 1 on a difference"
    )
    p.add_argument("--downstream", required=True, metavar="HOST:PORT")
    p.add_argument("--user", default="root")
    p.add_argument("--password", default="")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the token")
    add_config_argument(p)
    p.set_defaults(func=cmd_check)


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--downstream must be HOST:PORT, got {text!r}")
    return host, int(port)


def cmd_check(args) -> int:
    from cdc_equipment.checks.downstream import run_check

    host, port = parse_address(args.downstream)
    report = run_check(load(args.config), host, port, args.user, args.password, args.timeout)
    print(report.render())
    return 0 if report.equal else 1
