"""`cdc ha reseed --dumper-id N`: an HA follower that was away so long that the leader purged
the file its copy continues in (its dump gets 1236 for good) gets the leader's current files
instead (`dumper.ha.reseed`; every stream's copy with `[dumper] streams` > 1); start it again
afterwards and it follows."""

from __future__ import annotations

import argparse
import asyncio

from cdc.config import ConfigError, load
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    ha = sub.add_parser("ha", help="dumper HA maintenance")
    ha_sub = ha.add_subparsers(dest="ha_command", required=True, metavar="COMMAND")
    p = ha_sub.add_parser(
        "reseed",
        help="replace a stopped follower's copy with the leader's current files (byte for byte)",
    )
    add_config_argument(p)
    p.add_argument(
        "--dumper-id", type=int, required=True, help="the [[dumper.peers]] id of the follower"
    )
    p.set_defaults(func=cmd_reseed)


def cmd_reseed(args) -> int:
    import pymysql

    from dumper.ha import GmsLeaseStore
    from dumper.ha.reseed import ReseedError, reseed

    config = load(args.config)
    if not config.dumper.peers:
        raise ConfigError(f"{args.config} lists no [[dumper.peers]]: there is no HA follower")
    config = config.for_dumper(args.dumper_id)
    try:
        print(asyncio.run(reseed(config, GmsLeaseStore(config))))
    except ReseedError as exc:
        raise ConfigError(str(exc)) from None
    except (pymysql.MySQLError, ConnectionError) as exc:
        raise ConfigError(
            f"the GMS at {config.gms.host}:{config.gms.port} (who leads?): {exc}"
        ) from None
    return 0
