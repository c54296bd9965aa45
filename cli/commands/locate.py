"""`cdc locate`: one transaction of the global binlog by its commit TSO, its GTID or a file
position in it; prints all three (`binlog_writer.locate`), from the binlog files of the
configured dumper (`[dumper] binlog_dir`, or `--dir`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cdc.config import ConfigError, load

DEFAULT_CONFIG = "cdc.toml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "locate",
        help="map a commit TSO, a GTID or a FILE:POS of the global binlog to the other two",
    )
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"default {DEFAULT_CONFIG}")
    p.add_argument(
        "--dir", metavar="DIR", help="binlog files + index (default: [dumper] binlog_dir)"
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--tso", type=int, help="the first transaction committed at or after TSO")
    what.add_argument(
        "--gtid", metavar="UUID:N", help="the transaction with this GTID (or DOMAIN-SERVER-SEQ)"
    )
    what.add_argument("--pos", metavar="FILE:POS", help="the transaction holding this position")
    p.set_defaults(func=cmd_locate)


def cmd_locate(args) -> int:
    from binlog_writer import locate
    from cdc.binlog.errors import CodecError

    config = load(args.config)
    directory = Path(args.dir or config.dumper.binlog_dir)
    base = config.dumper.binlog_base
    try:
        if args.tso is not None:
            found = locate.by_tso(directory, base, args.tso)
        elif args.gtid is not None:
            found = locate.by_gtid_text(directory, base, args.gtid)
        else:
            file, sep, pos = args.pos.rpartition(":")
            if not sep or not pos.isdigit():
                raise ConfigError(f"--pos {args.pos!r}: expected FILE:POS, e.g. binlog.000001:4")
            found = locate.by_position(directory, base, file, int(pos))
    except (locate.LocateError, CodecError) as exc:
        raise ConfigError(str(exc)) from None
    print(found)
    return 0
