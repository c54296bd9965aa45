"""Stopping the heartbeat task at any moment leaves no XA branch prepared: a beat cancelled
between XA PREPARE and XA COMMIT held the heartbeat row and the merge (`cdc bench scale` hung
on the next beat's lock wait)."""

from __future__ import annotations

import asyncio
import random

from cdc_equipment.cn import ComputeNode
from tests.cn.conftest import with_cn, xa_prepared


async def test_stop_at_random_moments_leaves_nothing_prepared(cn_config):
    config = with_cn(cn_config, heartbeat_interval_ms=1)  # always in the middle of a beat
    rng = random.Random(7)
    async with ComputeNode(config) as cn:
        for _ in range(15):
            cn.start_heartbeat()
            await asyncio.sleep(rng.uniform(0.005, 0.05))
            await cn.stop_heartbeat()
            assert not cn.heartbeat.running
        assert cn.heartbeat.count > 0
        # After a bad stop this waits on the heartbeat row's lock (held by the prepared branch).
        await asyncio.wait_for(cn.heartbeat_once(), 30)
    assert all(not branches for branches in xa_prepared(config).values())
