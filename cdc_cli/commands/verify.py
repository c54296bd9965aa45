"""`cdc verify-binlog`: read the global binlog with python-mysql-replication and check it against
the CN's ground-truth log (cdc_equipment/checks/verify_binlog.py); exit 1 on any violation.

The binlog comes from a running dumper (`--server`, default the `[dumper]` of cdc.toml) or from a
directory of files (`--from-files`), which this command serves itself on a private port for the
time of the read, and also checks with `mariadb-binlog --verify-binlog-checksum`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

from cdc.config import ConfigError, load
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify-binlog",
        help="check the global binlog against the CN ground truth; exit 1 on a violation",
    )
    add_config_argument(p)
    p.add_argument(
        "--ground-truth", metavar="FILE", help="default: [cn] ground_truth_log of the config"
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--server", metavar="HOST:PORT", help="default: the configured dumper")
    source.add_argument("--from-files", metavar="DIR", help="binlog files + index in DIR")
    p.add_argument("--user", default=None, help="dumper user (default: the cluster's repl user)")
    p.add_argument("--password", default=None)
    p.add_argument(
        "--allow-pending",
        action="store_true",
        help="committed transactions newer than the binlog's end are not violations (live CN)",
    )
    p.set_defaults(func=cmd_verify)


def cmd_verify(args) -> int:
    from cdc_equipment.checks.verify_binlog import VerifyError, check, check_checksums, read_server
    from cdc_equipment.ground_truth import read as read_ground_truth
    from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER

    config = load(args.config)
    truth_path = args.ground_truth or config.cn.ground_truth_log
    if not truth_path:
        raise ConfigError("no ground truth: pass --ground-truth FILE or set [cn] ground_truth_log")
    if not Path(truth_path).is_file():
        raise ConfigError(f"ground truth {truth_path}: not found")
    truth = read_ground_truth(truth_path)
    try:
        if args.from_files:
            directory = Path(args.from_files)
            base = config.dumper.binlog_base
            if not (directory / f"{base}.index").is_file():
                raise ConfigError(f"{directory}: no {base}.index (not a binlog directory)")
            with serve_files(directory, base) as (port, user, password):
                read = read_server("127.0.0.1", port, user, password)
            report = check(read, truth, args.allow_pending)
            report.checks.append(check_checksums(directory, base))
        elif config.dumper.streams > 1 and not args.server:
            report = _check_streams(config, args, truth)
        else:
            host, port = parse_address(args.server or f"{config.dumper.host}:{config.dumper.port}")
            user = args.user or DEFAULT_USER
            password = args.password if args.password is not None else DEFAULT_PASSWORD
            report = check(read_server(host, port, user, password), truth, args.allow_pending)
    except VerifyError as exc:
        raise ConfigError(str(exc)) from None
    print(report.render())
    return 0 if report.ok else 1


def _check_streams(config, args, truth):
    """Every stream of a multi-stream binlog, read from its own port (docs/streams.md); a
    stream on another host (`[dumper.stream_addresses]`) on that host."""
    from cdc.streams import StreamRouter, stream_address, stream_port
    from cdc_equipment.checks.verify_binlog import check_streams, read_server
    from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER

    user = args.user or DEFAULT_USER
    password = args.password if args.password is not None else DEFAULT_PASSWORD
    d = config.dumper
    reads = [
        read_server((stream_address(d, i) or (d.host,))[0], stream_port(d, i), user, password)
        for i in range(d.streams)
    ]
    router = StreamRouter.of(config)
    return check_streams(
        reads, truth, lambda db, t: router.stream_of(db.encode(), t.encode()), args.allow_pending
    )


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--server must be HOST:PORT, got {text!r}")
    return host, int(port)


@contextlib.contextmanager
def serve_files(directory: Path, base: str) -> Iterator[tuple[int, str, str]]:
    """Serve `directory` with the dumper's protocol server on a free local port, from a thread
    (pmr is synchronous), for a throw-away user; yields (port, user, password)."""
    from cdc.config import DumperConfig, DumperUser
    from cdc.protocol.auth import native_hash
    from dumper.server import serve

    user, password = "verify", secrets.token_hex(8)
    config = DumperConfig(
        host="127.0.0.1",
        port=0,
        binlog_dir=str(directory),
        binlog_base=base,
        users=[DumperUser(user, native_hash(password))],
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="verify-serve", daemon=True)
    thread.start()
    try:
        server = asyncio.run_coroutine_threadsafe(serve(config, directory), loop).result(30)
        try:
            yield server.port, user, password
        finally:
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
