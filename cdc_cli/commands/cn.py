"""`cdc cn init|recover|add-dn|ddl|move|jobs|heartbeat|flush-logs`: the reference compute
node."""

from __future__ import annotations

import argparse
import asyncio

from cdc.config import load
from cdc_cli.commands.options import add_config_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cn", help="reference compute node: catalogue, recovery, scale-out")
    csub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = csub.add_parser("init", help="create the catalogue and private tables; write CdcStart")
    init.set_defaults(func=cmd_init)
    rec = csub.add_parser("recover", help="settle every in-doubt XA transaction of the CN")
    rec.add_argument(
        "--wait", type=float, default=5.0, help="seconds to wait for attached branches (default 5)"
    )
    rec.set_defaults(func=cmd_recover)
    add = csub.add_parser(
        "add-dn", help="scale-out: add the DN(s) that `cdc cluster add-dn` started"
    )
    add.add_argument("--dn", type=int, default=None, help="DN id (default: every new DN)")
    add.set_defaults(func=cmd_add_dn)
    ddl = csub.add_parser(
        "ddl", help="run a logical DDL statement (every CN process pauses the table meanwhile)"
    )
    ddl.add_argument("sql", help="CREATE / ALTER / DROP / TRUNCATE TABLE db.table ...")
    kind = ddl.add_mutually_exclusive_group()
    kind.add_argument("--shard-key", default=None, help="CREATE TABLE: partition by this column")
    kind.add_argument("--broadcast", action="store_true", help="CREATE TABLE: a copy on every DN")
    ddl.add_argument("--partitions", type=int, default=8, help="CREATE TABLE: default 8")
    ddl.set_defaults(func=cmd_ddl)
    move = csub.add_parser("move", help="move one partition of a logical table to a DN")
    move.add_argument("table", help="db.table")
    move.add_argument("partition", type=int)
    move.add_argument("--dn", type=int, required=True, help="the DN to move it to")
    move.set_defaults(func=cmd_move)
    jobs = csub.add_parser(
        "jobs", help="list cluster changes (running, done, rolled back) with their step and owner"
    )
    jobs.add_argument("--limit", type=int, default=20, help="the newest N jobs (default 20)")
    jobs.add_argument(
        "--roll-back",
        type=int,
        metavar="ID",
        help="roll back running job ID, whose owner is dead (one whose takeover keeps failing)",
    )
    jobs.set_defaults(func=cmd_jobs)
    hb = csub.add_parser("heartbeat", help="send heartbeats until interrupted (or --count)")
    hb.add_argument("--count", type=int, default=0, help="stop after N heartbeats (0: forever)")
    hb.set_defaults(func=cmd_heartbeat)
    fl = csub.add_parser("flush-logs", help="write a FlushLogs marker")
    fl.set_defaults(func=cmd_flush_logs)
    for c in csub.choices.values():
        add_config_argument(c)


def _cn(args):
    from cdc_equipment.cn import ComputeNode
    from cdc_equipment.cn.job_crash_points import JobCrashPoints

    # CDC_CN_JOB_CRASH_AT: the job chaos test kills a change at each of its steps.
    return ComputeNode(load(args.config), job_crash_points=JobCrashPoints.from_env())


def cmd_init(args) -> int:
    from cdc_equipment.cn import init

    result = asyncio.run(init(load(args.config)))
    if result.created:
        print(f"initialised; CdcStart written at TSO {result.cdc_start_tso}")
    else:
        print(f"already initialised (CdcStart at TSO {result.cdc_start_tso}); checked tables")
    return 0


def cmd_recover(args) -> int:
    async def run():
        cn = _cn(args)
        await cn.start(recover=False)
        try:
            report = await cn.recover(wait_s=args.wait)
            # A cluster change whose CN died is finished (or rolled back) too.
            return report, *await cn.jobs.finish_dead_owners_jobs()
        finally:
            await cn.close()

    report, live_jobs, stuck = asyncio.run(run())
    print(f"recovery: {report.summary()}")
    if live_jobs:
        print(f"{live_jobs} job(s) still run by live CNs (`cdc cn jobs`)")
    for job in stuck:
        print(
            f"job {job.id} ({job.what}) cannot be taken over: {job.failures} attempts in a row "
            f"failed, the last with: {job.reason}. Every later change waits for it: fix the "
            f"cause, or `cdc cn jobs --roll-back {job.id}`"
        )
    return 1 if report.skipped or stuck else 0


def cmd_add_dn(args) -> int:
    from cdc_equipment.cn import CatalogueError

    async def run():
        async with _cn(args) as cn:
            new = (
                [args.dn]
                if args.dn
                else [n.id for n in cn.config.dn if n.id not in cn.catalogue.dns]
            )
            if not new:
                raise CatalogueError(
                    "every configured DN is already a storage DN: run `cdc cluster add-dn` first"
                )
            return [(dn, await cn.add_dn(dn, progress)) for dn in new]

    for dn, res in asyncio.run(run()):
        print(
            f"DN {dn} added: StorageChange at TSO {res.storage_change_tso}, "
            f"{len(res.moved)} partition(s) moved, MetaChange at TSO {res.meta_change_tso}"
        )
    return 0


def progress(line: str) -> None:
    print(f"  {line}", flush=True)


def cmd_ddl(args) -> int:
    async def run():
        async with _cn(args) as cn:
            return await cn.execute_ddl(
                args.sql,
                shard_key=args.shard_key,
                partitions=args.partitions,
                broadcast=args.broadcast,
                progress=progress,
            )

    tso = asyncio.run(run())
    print("nothing to do (IF [NOT] EXISTS)" if tso is None else f"DDL record at TSO {tso}")
    return 0


def cmd_move(args) -> int:
    db, _, table = args.table.partition(".")

    async def run():
        async with _cn(args) as cn:
            return await cn.move_partition(db, table, args.partition, args.dn, progress)

    tso = asyncio.run(run())
    print("nothing to do (already there)" if tso is None else f"moved: MetaChange at TSO {tso}")
    return 0


def cmd_jobs(args) -> int:
    if args.roll_back is not None:
        return _roll_back_job(args)
    from cdc.cn_protocol.dn_pool import connect
    from cdc.cn_protocol.gms import GmsStore
    from cdc_equipment.cn.job_log import JobLog, render

    config = load(args.config)
    store = GmsStore(lambda: connect(config.gms), config.cn.catalogue_database)
    log = JobLog(store.run, config.cn.catalogue_database)

    async def run():
        return await log.recent(args.limit), await log.live_members()

    jobs, live = asyncio.run(run())
    print(render(jobs, live))
    return 0


def _roll_back_job(args) -> int:
    async def run():
        cn = _cn(args)
        await cn.start(recover=False)
        try:
            return await cn.jobs.roll_back_job(args.roll_back, progress)
        finally:
            await cn.close()

    job = asyncio.run(run())
    print(f"job {job.id} ({job.what}): {job.state}: {job.reason}")
    return 0 if job.state == "rolled back" else 1


def cmd_heartbeat(args) -> int:
    async def run():
        async with _cn(args) as cn:
            n = 0
            interval = cn.config.cn.heartbeat_interval_ms / 1000
            while not args.count or n < args.count:
                await cn.heartbeat_once()
                n += 1
                await asyncio.sleep(interval)
            return n

    print(f"sent {asyncio.run(run())} heartbeats")
    return 0


def cmd_flush_logs(args) -> int:
    async def run():
        async with _cn(args) as cn:  # start() with recovery, close() on the way out
            return await cn.flush_logs()

    print(f"FlushLogs written at TSO {asyncio.run(run())}")
    return 0
