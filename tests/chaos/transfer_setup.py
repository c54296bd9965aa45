"""What the chaos tests share: a CN with the transfer tables, and a seeded random source."""

from __future__ import annotations

import os
import random
import time

from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from tests.e2e.test_pipeline import ACCOUNTS, BALANCE


async def transfer_cn(cfg) -> tuple[ComputeNode, TransferWorkload]:
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)
    await workload.setup()
    return cn, workload


def chaos_rng(what: str) -> random.Random:
    seed = int(os.environ.get("CDC_CHAOS_SEED", time.time()))
    print(f"{what} seed {seed} (CDC_CHAOS_SEED to replay the kill timing)")
    return random.Random(seed)
