"""MergeJoint's marker handling without a cluster: what StorageChange, CdcStart and FlushLogs
do, through a fake of our own `SourceSet` and a rotate callback."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from cdc.cn_protocol.schema import CDC_START, FLUSH_LOGS, STORAGE_CHANGE
from cdc.keys import Kind, SortKey, lift
from merge_joint import MergeJoint
from merge_source import Fragment, FragmentKind, Watermark


class FakeSourceSet:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def add_source(self, dn: int, entry: dict[str, Any], tso: int) -> None:
        self.calls.append(("add", dn, entry["port"], tso))

    def remove_source(self, dn: int) -> None:
        self.calls.append(("remove", dn))


def marker(dn: int, tso: int, kind: str, content: dict | None = None) -> Fragment:
    row = {"type": kind, "content": json.dumps(content or {}), "id": tso}
    key = SortKey(tso, Kind.BRANCH, tso)
    return Fragment(key, dn, tso, (dn,), FragmentKind.INSTRUCTION, markers=[row])


def data(dn: int, tso: int) -> Fragment:
    return Fragment(SortKey(tso, Kind.BRANCH, tso), dn, tso, (dn,), FragmentKind.DATA)


def mark(dn: int, tso: int) -> Watermark:
    return Watermark(dn, SortKey(tso, Kind.BRANCH, tso))


async def batches(joint: MergeJoint, n: int) -> list[list[int]]:
    """The TSOs of the next `n` batches MergeJoint yields."""
    out = []
    stream = joint.transactions()
    async with asyncio.timeout(5):
        async for ready in stream:
            out.append([t.tso for t in ready])
            if len(out) == n:
                break
    await stream.aclose()
    return out


async def test_storage_change_adds_the_dn_right_after_the_marker():
    queue: asyncio.Queue = asyncio.Queue()
    sources = FakeSourceSet()
    records = []
    joint = MergeJoint(queue, {1: None}, records.append, None, source_set=sources)
    content = {"dns": [{"id": 1, "port": 4001}, {"id": 2, "port": 4002}], "added": [2]}
    await queue.put([data(1, 100), marker(1, 200, STORAGE_CHANGE, content), mark(1, 200)])
    assert await batches(joint, 1) == [[100, 200]]  # the merge stops after the marker
    assert sources.calls == [("add", 2, 4002, 200)]
    assert records[0].kind == STORAGE_CHANGE and records[0].tso == 200  # recorded first
    # dn2 joins with a watermark after everything at 200: dn1 alone no longer decides.
    assert joint.merger.watermark(2) == lift(2, SortKey.joining_after(200))
    await queue.put([data(1, 300), mark(1, 400)])
    await queue.put([data(2, 250), mark(2, 400)])
    assert await batches(joint, 1) == [[250, 300]]


async def test_cdc_start_removes_the_dns_it_does_not_list():
    queue: asyncio.Queue = asyncio.Queue()
    sources = FakeSourceSet()
    joint = MergeJoint(queue, {1: None, 3: None}, None, None, source_set=sources)
    await queue.put([mark(3, 150), marker(1, 100, CDC_START, {"dns": [{"id": 1}]}), mark(1, 100)])
    assert await batches(joint, 1) == [[100]]
    assert sources.calls == [("remove", 3)]
    assert joint.merger.sources == [1]
    await queue.put([data(1, 200), mark(1, 200)])  # dn3 (stuck at 150) holds nothing any more
    assert await batches(joint, 1) == [[200]]


async def test_flush_logs_rotates_once_the_batch_before_it_is_taken():
    queue: asyncio.Queue = asyncio.Queue()
    rotations: list[int] = []
    written: list[int] = []
    joint = MergeJoint(queue, {1: None}, None, None, rotate=lambda: rotations.append(len(written)))
    await queue.put([data(1, 100), marker(1, 200, FLUSH_LOGS), data(1, 300), mark(1, 300)])
    stream = joint.transactions()
    async with asyncio.timeout(5):
        ready = await anext(stream)
        assert [t.tso for t in ready] == [100, 200] and rotations == []  # not before it is written
        written += [t.tso for t in ready]
        ready = await anext(stream)
    assert rotations == [2]  # after 100 and the marker, before 300
    assert [t.tso for t in ready] == [300]
    await stream.aclose()
