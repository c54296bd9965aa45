"""`cdc flashback`: undo what a range of the global binlog did to a table or a database
(`history`): the inverse changes, newest first, as SQL (stdout or `--sql FILE`), as a binlog
file (`--binlog FILE`, for `mariadb-binlog FILE | mariadb` or a replica) and/or applied through
the CN (`--apply`). Read from the dumper's files (`[dumper] binlog_dir` and the files archived
in `[dumper] archive_dir`, or `--dir` and `--archive`), or from a dumper elsewhere over the MySQL
protocol (`--server`, copied first: `history.remote`). Keys
changed again after the range are conflicts: reported and skipped unless `--force`."""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import tempfile
from pathlib import Path

from cdc.config import ConfigError, load
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "flashback",
        help="undo a range of the global binlog on a table or database (SQL, binlog, or apply)",
    )
    add_config_argument(p)
    p.add_argument("target", metavar="DB[.TABLE]", help="the table, or every table of a database")
    points = "TSO n | TIMESTAMP 'YYYY-mm-dd HH:MM:SS[.ffffff]' | GTID 'uuid:n' | 'file':pos"
    p.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="POINT",
        help=f"the state to go back to: {points}",
    )
    p.add_argument(
        "--to",
        dest="end",
        metavar="POINT",
        help="the range's end (default: the newest transaction written)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--dir", metavar="DIR", help="binlog files + index (default: [dumper] binlog_dir)"
    )
    where.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="a dumper elsewhere: its served binlog copied over the MySQL protocol first "
        "(as [dumper] peer_user, or --user/--password)",
    )
    p.add_argument(
        "--archive",
        metavar="DIR",
        help="with --dir: the files purged from it into an archive directory (default, without "
        "--dir: [dumper] archive_dir's)",
    )
    p.add_argument("--user", help="with --server (default: [dumper] peer_user)")
    p.add_argument("--password", help="with --server (default: [dumper] peer_password)")
    p.add_argument(
        "--sql",
        metavar="FILE",
        help="write the SQL here ('-': stdout; the default "
        "when neither --binlog nor --apply is given)",
    )
    p.add_argument("--binlog", metavar="FILE", help="write the inverse as a binlog file")
    p.add_argument("--apply", action="store_true", help="apply the inverse through the CN")
    p.add_argument(
        "--force",
        action="store_true",
        help="undo keys changed again after the range too (default: skip them)",
    )
    p.set_defaults(func=cmd_flashback)


def cmd_flashback(args) -> int:
    import history

    config = load(args.config)
    d = config.dumper
    try:
        if args.server is None:
            plan = _plan(args, Path(args.dir or d.binlog_dir), d.binlog_base, _archive(args, d))
        else:
            with tempfile.TemporaryDirectory(prefix="cdc-flashback-") as copy:
                user = args.user or d.peer_user
                password = d.peer_password if args.password is None else args.password
                asyncio.run(
                    history.copy_served(args.server, user, password, Path(copy), d.binlog_base)
                )
                plan = _plan(args, Path(copy), d.binlog_base)
    except (history.PointError, history.FlashbackError) as exc:
        raise ConfigError(str(exc)) from None
    print(
        f"flashback of {args.target} over ({plan.start}, {plan.end}]: {len(plan.undo)} "
        f"transactions, {plan.rows} rows, {len(plan.conflicts)} conflicts "
        f"({'undone anyway: --force' if args.force else 'skipped'})",
        file=sys.stderr,
    )
    for conflict in plan.conflicts:
        print(f"conflict: {conflict}", file=sys.stderr)
    if args.sql or not (args.binlog or args.apply):
        _write_sql(plan, args.sql or "-")
    if args.binlog:
        history.write_binlog(plan, Path(args.binlog))
    if args.apply:
        from cdc_equipment.cn import connect

        try:
            done = asyncio.run(history.apply(plan, functools.partial(connect, config)))
        except history.FlashbackError as exc:
            raise ConfigError(str(exc)) from None
        for late in done.late_conflicts:
            print(f"conflict: {late}", file=sys.stderr)
        print(
            f"applied {done.transactions} transactions, {done.rows} rows through the CN",
            file=sys.stderr,
        )
    return 0


def _archive(args, d) -> Path | None:
    """Where files purged from the directory read went: `--archive`, else (the configured
    directory) `[dumper] archive_dir`'s, as the server archives them (`archive_of`)."""
    from cdc.streams import archive_of

    if args.archive:
        return Path(args.archive)
    if args.dir is None and d.archive_dir:
        return archive_of(d, d.binlog_dir)
    return None


def _plan(args, directory: Path, base: str, archive: Path | None = None):
    import history

    files = history.RetainedFiles(directory, base, archive)
    start = history.resolve(args.start, files)
    end = history.resolve(args.end, files) if args.end else files.end_point()
    return history.plan(files, start, end, history.chosen(args.target), force=args.force)


def _write_sql(plan, where: str) -> None:
    import history

    out = sys.stdout if where == "-" else open(where, "w")  # noqa: SIM115
    try:
        for line in history.script(plan):
            out.write(line + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
