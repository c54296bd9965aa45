"""The partition gate: freezes are counted, so a DDL's thaw cannot end a scale-out's freeze.
(A 5-minute mixed run lost two writes that way: they went to the old copy of a moving
partition while a ddl-mix DDL had thawed it.)"""

from __future__ import annotations

import asyncio

from cdc_equipment.cn.partition_gate import PartitionGate

KEY = ("mix", "items", 3)


async def test_overlapping_freezes_hold_until_the_last_thaw():
    gate = PartitionGate()
    await gate.freeze({KEY})  # scale-out: copying partition 3
    await gate.freeze({KEY})  # a DDL on the same table
    await gate.thaw({KEY})  # the DDL is done
    held: set = set()
    entering = asyncio.create_task(gate.enter({KEY}, held))
    await asyncio.sleep(0.05)
    assert not entering.done(), "a write got through while scale-out still froze the partition"
    await gate.thaw({KEY})  # the scale-out switched the partition
    await asyncio.wait_for(entering, 1)
    assert held == {KEY}
    await gate.leave(held)
