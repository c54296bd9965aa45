"""`cdc preflight`: are the GMS and the DNs of `cdc.toml` set up the way the pipeline needs?
One line per problem (the node, the setting, what it is, what it must be, the fix), exit 1 on
any; `cdc start` runs the same checks (`refuse_wrong_settings`) and refuses with the same words.
The checks are `dumper/preflight.py`'s (docs/deploy.md, "Preflight")."""

from __future__ import annotations

import argparse
import json

from cdc.config import Config, ConfigError, load
from cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "preflight",
        help="check the GMS and DNs' settings, grants and clocks; exit 1 on any problem",
    )
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument(
        "--connect-timeout", type=float, default=3.0, help="seconds per node (default 3)"
    )
    p.add_argument(
        "--max-skew-ms",
        type=float,
        default=1000.0,
        help="largest clock difference to the GMS (the TSO's clock) allowed (default 1000)",
    )
    add_config_argument(p)
    p.set_defaults(func=cmd_preflight)


def cmd_preflight(args) -> int:
    from dumper.preflight import preflight

    report = preflight(load(args.config), args.connect_timeout, args.max_skew_ms)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        for problem in report.problems:
            print(problem.line())
        print(report.summary() + ("" if report.problems else ": all good"))
    return 0 if report.ok else 1


class PreflightRefused(ConfigError):
    """`cdc start` found a GMS or DN set up wrong (a ConfigError: one line to the user, exit 1)."""


def refuse_wrong_settings(cfg: Config) -> None:
    """`cdc start`'s preflight: raise with every wrong setting, in `cdc preflight`'s words.
    A node that cannot be reached is no refusal: the pipeline waits for it (docs/faults.md);
    warnings are logged."""
    import logging

    from dumper.preflight import preflight

    log = logging.getLogger("cdc.preflight")
    report = preflight(cfg)
    for problem in report.problems:
        if problem.severity != "fail":
            log.warning("preflight: %s", problem.line())
    if report.failures:
        lines = "\n".join(f"  {p.line()}" for p in report.failures)
        raise PreflightRefused(
            f"refusing to start: {len(report.failures)} problem(s) in the cluster's settings "
            f"(`cdc preflight` lists the same):\n{lines}"
        )
