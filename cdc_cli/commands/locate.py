"""`cdc locate`: one transaction of the global binlog by its commit TSO, its GTID or a file
position in it; prints all three (`binlog_writer.locate`), from the binlog files of the
configured dumper (`[dumper] binlog_dir` and those archived in `[dumper] archive_dir`, or
`--dir`). With `[dumper] streams` > 1, from
stream I's files (`--stream I`), or by TSO or GTID from every stream's (a line per stream)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cdc.config import ConfigError, DumperConfig, load
from cdc.streams import archive_of, stream_dir
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "locate",
        help="map a commit TSO, a GTID or a FILE:POS of the global binlog to the other two",
    )
    add_config_argument(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--dir", metavar="DIR", help="binlog files + index (default: [dumper] binlog_dir)"
    )
    where.add_argument(
        "--stream",
        type=int,
        metavar="I",
        help="[dumper] streams > 1: stream I's files (default: --tso and --gtid look in every "
        "stream, --pos needs it)",
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
    base = config.dumper.binlog_base
    at = None
    if args.pos is not None:
        file, sep, pos = args.pos.rpartition(":")
        if not sep or not pos.isdigit():
            raise ConfigError(f"--pos {args.pos!r}: expected FILE:POS, e.g. binlog.000001:4")
        at = (file, int(pos))
    directories = _directories(args, config.dumper)
    found, missing = [], []
    for stream, directory in directories:
        archive = None
        if config.dumper.archive_dir and not args.dir:
            archive = archive_of(config.dumper, directory)
        try:
            if args.tso is not None:
                where = locate.by_tso(directory, base, args.tso, archive)
            elif args.gtid is not None:
                where = locate.by_gtid_text(directory, base, args.gtid, archive)
            else:
                where = locate.by_position(directory, base, *at, archive)
        except (locate.LocateError, CodecError) as exc:
            if len(directories) == 1:
                raise ConfigError(str(exc)) from None
            missing.append((stream, exc))
            continue
        found.append((stream, where))
    if not found:
        raise ConfigError("; ".join(f"stream {i}: {exc}" for i, exc in missing))
    if len(directories) == 1:
        print(found[0][1])
        return 0
    # Every stream by TSO: where each stream is at that TSO (a stream without one says so);
    # by GTID only the stream that holds it (each numbers its own).
    lines = dict(found) | ({} if args.tso is None else {i: f"- ({exc})" for i, exc in missing})
    for stream in sorted(lines):
        print(f"stream {stream}: {lines[stream]}")
    return 0


def _directories(args, d: DumperConfig) -> list[tuple[int | None, Path]]:
    """The binlog directories to look in, with their stream (None: the one global binlog)."""
    if args.dir:
        return [(None, Path(args.dir))]
    if d.streams == 1:
        if args.stream is not None:
            raise ConfigError(f"--stream {args.stream}: [dumper] streams is 1 (no stream files)")
        return [(None, Path(d.binlog_dir))]
    if args.stream is not None:
        if not 0 <= args.stream < d.streams:
            raise ConfigError(f"--stream {args.stream}: [dumper] streams is {d.streams}")
        return [(args.stream, stream_dir(d, args.stream))]
    if args.pos is not None:
        raise ConfigError(
            f"--pos with [dumper] streams = {d.streams}: name the stream (--stream I); the "
            "streams' files have the same names"
        )
    return [(i, stream_dir(d, i)) for i in range(d.streams)]
