"""`cdc demo`: what `make demo` runs. A cluster (GMS + 3 DNs), the CN initialised, the pipeline
and dumper in the background, a MariaDB replica attached to the dumper, a few seconds of the
workloads, then what a user would look at: the dumper's binlog, the replica, `cdc check`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from pathlib import Path

from cdc import admin_sql
from cdc_cli.commands.cluster import print_table
from cdc_equipment.local_cluster import LocalCluster
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="cluster + pipeline + replica + workload, then show and check it"
    )
    p.add_argument("--dir", default="var/demo")
    p.add_argument("--dns", type=int, default=3)
    p.add_argument("--duration", type=float, default=20.0, help="seconds of workload (default 20)")
    p.set_defaults(func=cmd_demo)


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def query(
    host: str, port: int, sql: str, user: str = "root", password: str = ""
) -> tuple[list[str], list[tuple]]:
    conn = admin_sql.connect(host, port, user, password, autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return [d[0] for d in cur.description or []], list(cur.fetchall())
    finally:
        conn.close()


def show(columns: list[str], rows: list[tuple]) -> None:
    print_table(
        [tuple(columns), *[tuple("NULL" if v is None else str(v) for v in r) for r in rows]]
    )


async def run_workloads(config, duration: float) -> None:
    from cdc_equipment.cn import ComputeNode
    from cdc_equipment.cn.workloads.runner import run_workload
    from cdc_equipment.cn.workloads.transfer import TransferWorkload

    cn = ComputeNode(config)
    await cn.start()
    try:
        transfer = TransferWorkload(cn, accounts=1000)
        await transfer.setup()
        steps = [transfer.step]
        try:
            from cdc_equipment.cn.workloads.orders import OrdersWorkload

            orders = OrdersWorkload(cn)
            await orders.setup()
            steps.append(orders.step)
        except ImportError:
            pass
        stats = await asyncio.gather(
            *(run_workload(s, threads=4, duration_s=duration) for s in steps)
        )
        for name, st in zip(["transfer", "orders"], stats, strict=False):
            print(st.summary(name))
        print(await transfer.report())
    finally:
        await cn.close()


def wait_until_merging(status_file, timeout: float = 60.0) -> None:
    """Until every DN's watermark moves (heartbeats flow; start-up recovery is over)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads(status_file.read_text()).get("low_watermark_tso"):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the pipeline did not start merging within {timeout:.0f}s; see its log")


def shown_path(path: Path) -> str:
    """`path` relative to the working directory when it is below it (as the README shows)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def quiet_reference_cn() -> None:
    """The reference CN logs each step of every cluster change at INFO (the demo's table
    creation and `cdc check`'s token table: five lines a table). That is progress for `cdc cn
    ddl`, noise here: the demo shows what the CN wrote, not how. Warnings and errors still show."""
    from cdc_equipment import cn

    logging.getLogger(cn.__name__).setLevel(logging.WARNING)


def cmd_demo(args) -> int:
    from cdc_cli.commands.pipeline import start, state_dir
    from cdc_equipment.cn import init

    quiet_reference_cn()
    started = time.monotonic()
    step(f"cluster: GMS + {args.dns} DNs in {args.dir}")
    cluster = LocalCluster(args.dir)
    cfg = cluster.up(dns=args.dns)
    config_path = shown_path(cluster.config_file)
    if not cfg.cn.ground_truth_log:
        # Every CN process of the demo logs what it committed, so `cdc verify-binlog` can
        # check the global binlog against it (README, "Commands").
        cfg.cn.ground_truth_log = str(cluster.dir / "ground-truth.jsonl")
        cfg.dump(config_path)
    print(f"config: {config_path}")

    step("reference CN: catalogue, private tables, CdcStart marker")
    result = asyncio.run(init(cfg))
    if result.created:
        print(f"initialised; CdcStart written at TSO {result.cdc_start_tso}")
    else:
        print(f"already initialised (CdcStart at TSO {result.cdc_start_tso})")

    step("pipeline + dumper (background)")
    start(config_path, background=True)
    host, port = cfg.dumper.host, cfg.dumper.port
    wait_until_merging(state_dir(config_path) / "status.json")

    step("MariaDB replica of the dumper")
    replica = cluster.replicas[0] if cluster.replicas else cluster.add_replica()
    columns, rows = query(replica.host, replica.port, "SHOW SLAVE STATUS")
    if not rows:
        conn = replica.connect()
        with conn.cursor() as cur:
            cur.execute(
                f"CHANGE MASTER TO MASTER_HOST='{host}', MASTER_PORT={port}, MASTER_USER='{DEFAULT_USER}', "
                f"MASTER_PASSWORD='{DEFAULT_PASSWORD}', MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, "
                "MASTER_USE_GTID=no, MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1"
            )
            cur.execute("START SLAVE")
        conn.close()
    print(f"{replica.name} on 127.0.0.1:{replica.port} replicates from the dumper on {host}:{port}")
    # An empty server for the README's backfill (`cdc backfill --load`), not attached.
    spare = cluster.replicas[1] if len(cluster.replicas) > 1 else cluster.add_replica()
    print(f"{spare.name} on 127.0.0.1:{spare.port} is an empty server (a target for cdc backfill)")

    step(f"workloads for {args.duration:.0f}s")
    asyncio.run(run_workloads(cfg, args.duration))

    step(f"the dumper: mariadb -h{host} -P{port} -u{DEFAULT_USER} -p{DEFAULT_PASSWORD}")
    show(*query(host, port, "SHOW MASTER STATUS", DEFAULT_USER, DEFAULT_PASSWORD))
    print()
    show(*query(host, port, "SHOW BINLOG EVENTS LIMIT 12", DEFAULT_USER, DEFAULT_PASSWORD))

    step("cdc check (token through the CN, then per-table checksums)")
    from cdc_equipment.checks.downstream import run_check

    report = run_check(cfg, replica.host, replica.port)
    print(report.render())

    step("replica status")
    columns, rows = query(replica.host, replica.port, "SHOW SLAVE STATUS")
    status = dict(zip(columns, rows[0], strict=True))
    for key in (
        "Slave_IO_Running",
        "Slave_SQL_Running",
        "Master_Log_File",
        "Exec_Master_Log_Pos",
        "Seconds_Behind_Master",
        "Last_IO_Error",
        "Last_SQL_Error",
    ):
        print(f"  {key}: {status.get(key)}")

    step(f"done in {time.monotonic() - started:.0f}s; everything keeps running")
    print(f"  pipeline status: .venv/bin/cdc status --config {config_path}")
    print(
        f"  more traffic:    .venv/bin/cdc workload transfer --config {config_path} --threads 4 --duration 30"
    )
    print(
        f"  check again:     .venv/bin/cdc check --config {config_path} --downstream 127.0.0.1:{replica.port}"
    )
    print("  stop everything: make stop")
    return 0 if report.equal else 1
