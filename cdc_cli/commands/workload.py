"""`cdc workload transfer|orders|ddl-mix`: drive the cluster through the reference CN."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from cdc.config import load
from cdc_cli.commands.cluster import positive_int
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workload", help="run a workload through the reference CN")
    wsub = p.add_subparsers(dest="workload", required=True, metavar="WORKLOAD")
    for name, text in (
        ("transfer", "bank transfers between accounts on different DNs; the total never changes"),
        ("orders", "orders/customers with many column types, shard-key moves, large txns"),
        ("ddl-mix", "DDL (add/drop/modify column, index, truncate) while DML runs"),
    ):
        w = wsub.add_parser(name, help=text)
        w.add_argument("--threads", type=positive_int, default=8)
        w.add_argument("--duration", type=float, default=30.0, help="seconds (default 30)")
        w.add_argument(
            "--tps", type=float, default=None, help="target rate (default: as fast as possible)"
        )
        add_config_argument(w)
        w.add_argument("--db", default=None, help="logical database (default: per workload)")
        w.add_argument("--seed", type=int, default=None)
        w.add_argument("--heartbeat", action="store_true", help="run the heartbeat task too")
        if name == "transfer":
            w.add_argument("--accounts", type=positive_int, default=1000)
        if name == "orders":
            w.add_argument(
                "--large-rows",
                type=int,
                default=100_000,
                help="rows of an occasional large transaction (0: none)",
            )
            w.add_argument(
                "--large-every",
                type=int,
                default=2000,
                help="on average one large transaction per N steps",
            )
        w.set_defaults(func=cmd_workload)


def cmd_workload(args) -> int:
    from cdc.tasks import dump_tasks_on
    from cdc_equipment.cn import ComputeNode, init
    from cdc_equipment.cn.workloads import run_workload, set_up
    from cdc_equipment.crash_points import CrashPoints

    config = load(args.config)

    async def run() -> str:
        dump_tasks_on(signal.SIGUSR1)  # `kill -USR1`: what a workload that seems hung waits for
        await init(config)  # idempotent: a fresh cluster works out of the box
        cn = ComputeNode(config, crash_points=CrashPoints.from_env())
        await cn.start()
        try:
            workload = _workload(args, cn)
            await set_up(workload.setup)
            if args.heartbeat:
                cn.start_heartbeat()
            stats = await run_workload(
                workload.step, args.threads, args.duration, args.tps, args.seed
            )
            await cn.stop_heartbeat()
            return stats.summary(args.workload) + "\n" + await workload.report()
        finally:
            await cn.close()

    logging.getLogger("cdc_equipment.cn").setLevel(logging.WARNING)
    print(asyncio.run(run()))
    return 0


def _workload(args, cn):
    if args.workload == "transfer":
        from cdc_equipment.cn.workloads.transfer import TransferWorkload

        return TransferWorkload(cn, db=args.db or "bank", accounts=args.accounts)
    if args.workload == "orders":
        from cdc_equipment.cn.workloads.orders import OrdersWorkload

        return OrdersWorkload(
            cn, db=args.db or "shop", large_rows=args.large_rows, large_every=args.large_every
        )
    from cdc_equipment.cn.workloads.ddl_mix import DdlMixWorkload

    return DdlMixWorkload(cn, db=args.db or "mix")
