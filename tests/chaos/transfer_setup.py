"""What the chaos tests share: a CN with the transfer tables, a load in the background, and a
seeded random source."""

from __future__ import annotations

import asyncio
import os
import random
import time

from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from tests.e2e.test_pipeline import ACCOUNTS, BALANCE


async def transfer_cn(cfg) -> tuple[ComputeNode, TransferWorkload]:
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)
    await workload.setup()
    return cn, workload


def background_load(
    workload: TransferWorkload, threads: int = 2
) -> tuple[asyncio.Task, asyncio.Event]:
    """Transfers in the background until the event returned with the task is set (at most ten
    minutes): the load an HA test runs under."""
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_workload(workload.step, threads=threads, duration_s=600, stop=stop)
    )
    return task, stop


def chaos_rng(what: str) -> random.Random:
    seed = int(os.environ.get("CDC_CHAOS_SEED", time.time()))
    print(f"{what} seed {seed} (CDC_CHAOS_SEED to replay the kill timing)")
    return random.Random(seed)
