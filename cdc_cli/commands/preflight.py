"""`cdc preflight`: are the GMS and the DNs of `cdc.toml` set up the way the pipeline needs?
One line per problem (the node, the setting, what it is, what it must be, the fix), exit 1 on
any; `cdc start` runs the same checks (`refuse_wrong_settings`) and refuses with the same words.
The checks are `dumper/preflight.py`'s (docs/deploy.md, "Preflight")."""

from __future__ import annotations

import argparse
import dataclasses
import json

from cdc.config import Config, ConfigError, load
from cdc_cli.commands.options import add_config_argument


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
    p.add_argument(
        "--cn-conformance",
        action="store_true",
        help="also scan each DN's newest binlog files for writes outside the CN protocol",
    )
    p.add_argument(
        "--files", type=int, default=2, help="--cn-conformance: newest binlog files per DN (2)"
    )
    add_config_argument(p)
    p.set_defaults(func=cmd_preflight)


def cmd_preflight(args) -> int:
    from dumper.preflight import preflight

    cfg = load(args.config)
    report = preflight(cfg, args.connect_timeout, args.max_skew_ms)
    scans = cn_conformance(cfg, args.files) if args.cn_conformance else []
    conforming = all(s.ok for s in scans)
    if args.json:
        out = report.to_json()
        if args.cn_conformance:
            out["cn_conformance"] = [
                {
                    "dn": s.dn,
                    "from": s.start,
                    "groups": dict(s.groups),
                    "findings": dict(s.counts),
                    "examples": [dataclasses.asdict(f) for f in s.findings],
                    "error": s.error,
                }
                for s in scans
            ]
            out["ok"] = out["ok"] and conforming
        print(json.dumps(out, indent=2))
    else:
        for problem in report.problems:
            print(problem.line())
        for line in conformance_lines(scans):
            print(line)
        summary = report.summary()
        if args.cn_conformance:
            findings = sum(sum(s.counts.values()) for s in scans)
            unchecked = sum(1 for s in scans if s.error)
            summary += f"; CN conformance: {findings} finding(s), {unchecked} DN(s) unchecked"
        good = not report.problems and conforming
        print(summary + (": all good" if good else ""))
    return 0 if report.ok and conforming else 1


# The conformance scan's dumps register as this + DN id: beside the pipeline's own dumps
# ([pipeline] dump_server_id_base + DN id), never evicting them.
CONFORMANCE_SERVER_ID_OFFSET = 1000


def cn_conformance(cfg: Config, files: int) -> list:
    """Each DN's binlog judged by the MergeSource's classifier (merge_source/conformance.py)."""
    import asyncio

    from merge_source.conformance import scan

    base = cfg.pipeline.dump_server_id_base + CONFORMANCE_SERVER_ID_OFFSET

    async def scan_all():
        return await asyncio.gather(*(scan(dn, base + dn.id, files) for dn in cfg.dn))

    return asyncio.run(scan_all())


def conformance_lines(scans: list) -> list[str]:
    lines = []
    for s in scans:
        if s.error:
            lines.append(f"{s.dn}: CN conformance not checked: {s.error}")
            continue
        for f in s.findings:
            lines.append(
                f"{s.dn}: CN protocol: {f.rule} at {f.at}: {f.detail}; fix: write it as an XA "
                'transaction of the CN protocol (docs/deploy.md, "A CN that is not ours")'
            )
        more = {rule: n - MAX_SHOWN for rule, n in s.counts.items() if n > MAX_SHOWN}
        for rule, n in sorted(more.items()):
            lines.append(f"{s.dn}: CN protocol: {rule}: {n} more")
        groups = ", ".join(f"{n} {kind}" for kind, n in sorted(s.groups.items()))
        verdict = "conforms" if s.ok else f"{sum(s.counts.values())} finding(s)"
        lines.append(f"{s.dn}: CN conformance from {s.start}: {verdict} ({groups or 'no groups'})")
    return lines


MAX_SHOWN = 3  # = merge_source.conformance.MAX_EXAMPLES


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
