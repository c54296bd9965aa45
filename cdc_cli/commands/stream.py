"""`cdc stream serve --stream i`: stream i of a multi-stream binlog on a host of its own
(docs/streams.md, "A stream on another host"). It runs in the foreground until SIGTERM: run it
under a supervisor (systemd `Restart=always`) on the stream's host, with the same cdc.toml as
the merge's (its `[dumper.stream_addresses]` names where it listens)."""

from __future__ import annotations

import argparse

from cdc.config import ConfigError, host_port, load
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    stream = sub.add_parser("stream", help="a stream of a multi-stream binlog on another host")
    stream_sub = stream.add_subparsers(dest="stream_command", required=True, metavar="COMMAND")
    p = stream_sub.add_parser(
        "serve",
        help="listen for the merge and write and serve stream i here (its files, its port)",
    )
    add_config_argument(p)
    p.add_argument("--stream", type=int, required=True, help="the stream's number")
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="where to listen (default: its [dumper.stream_addresses] entry; 0.0.0.0:PORT for "
        "every interface)",
    )
    p.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    import asyncio

    from cdc.streams import stream_address
    from cdc_cli.commands.pipeline import state_dir
    from dumper.streams.listener import StreamListener

    config = load(args.config)
    d = config.dumper
    if not 0 <= args.stream < d.streams:
        raise ConfigError(f"--stream {args.stream}: [dumper] streams = {d.streams}")
    address = stream_address(d, args.stream)
    if address is None:
        raise ConfigError(
            f"{args.config}: stream {args.stream} has no [dumper.stream_addresses] entry: the "
            "merge starts it itself on its own host"
        )
    host, port = host_port(args.listen, "--listen") if args.listen else address
    directory = state_dir(args.config)
    asyncio.run(StreamListener(config, args.stream, host, port, directory).run())
    return 0
