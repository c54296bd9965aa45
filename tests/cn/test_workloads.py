"""The orders and ddl-mix workloads run cleanly (short runs, small large transactions), ddl-mix
stopped mid-DDL leaves no job running, and the `cdc workload transfer` CLI reports its TPS."""

from __future__ import annotations

import asyncio

from cdc_equipment.cn import ComputeNode
from cdc_equipment.cn.workloads import run_workload
from cdc_equipment.cn.workloads.ddl_mix import DdlMixWorkload
from cdc_equipment.cn.workloads.orders import OrdersWorkload
from tests.cn.conftest import cli, xa_prepared


async def test_orders_and_ddl_mix(cn_config):
    cn = ComputeNode(cn_config)
    await cn.start()
    try:
        orders = OrdersWorkload(
            cn, db="orders_test", customers=200, large_rows=3000, large_every=40
        )
        await orders.setup()
        stats = await run_workload(orders.step, threads=4, duration_s=4, seed=3)
        assert stats.committed > 20 and stats.failed == 0, stats.summary("orders")
        assert "orders" in await orders.report()

        mix = DdlMixWorkload(cn, db="mix_test", keys=100, ddl_every_s=0.3)
        await mix.setup()
        stop = asyncio.Event()

        async def enough_ddl() -> None:  # 5 DDLs, however long a loaded machine takes
            while mix.ddl_done < 5:
                await asyncio.sleep(0.1)
            stop.set()

        stopper = asyncio.create_task(enough_ddl())
        stats = await run_workload(mix.step, threads=4, duration_s=120, seed=4, stop=stop)
        stopper.cancel()
        # Stopped while one of its DDLs is a running job: that DDL ends first (a job left
        # running would be finished by the next CN to start, after the workload ended).
        while not await own_running_jobs(cn):
            await asyncio.sleep(0.01)
        await mix.report()
        assert await own_running_jobs(cn) == []
        assert stats.committed > 20 and stats.failed == 0, stats.summary("ddl-mix")
        assert mix.ddl_done >= 5
    finally:
        await cn.close()
    assert xa_prepared(cn_config) == {1: [], 2: [], 3: []}


async def own_running_jobs(cn: ComputeNode) -> list:
    return [j for j in await cn.jobs.log.running() if j.owner == cn.ctx.instance_id]


def test_workload_cli_reports_tps(cn_config_file):
    res = cli(
        "workload", "transfer", "--threads", "4", "--duration", "2", "--db", "cli_test",
        "--accounts", "50", "--config", str(cn_config_file),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert " TPS " in res.stdout and "(unchanged;" in res.stdout, res.stdout
