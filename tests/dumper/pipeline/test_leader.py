"""The leader's orchestration without a cluster: fake sources (our `SourceFactory`) feed
fragments and watermarks, a real MergeJoint merges them, a real BinlogWriter writes a temp dir,
an in-memory `PipelineMetadata` keeps checkpoints and topology."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pymysql

from cdc.keys import GlobalKey
from dumper.pipeline import Leader
from tests.dumper.pipeline.fakes import (
    FakeFactory,
    FakeMetadata,
    Script,
    branch,
    config,
    mark,
    storage_change,
    written_tsos,
)


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def run_until(leader: Leader, condition: Callable[[], bool]) -> None:
    task = asyncio.create_task(leader.run())
    try:
        await until(lambda: condition() or task.done())
        if task.done():
            task.result()  # raises what stopped it
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def two_dn_scripts() -> dict[int, Script]:
    """A distributed transaction at 100 (both DNs), one on dn1 at 200, one on dn2 at 300."""
    scripts = {
        1: Script([[branch(1, 100, (1, 2)), mark(1, 100)], [branch(1, 200, (1,)), mark(1, 250)]]),
        2: Script([[branch(2, 100, (1, 2)), mark(2, 100)], [branch(2, 300, (2,)), mark(2, 350)]]),
    }
    for dn, script in scripts.items():
        script.batches.append([mark(dn, 400)])  # both past 300: it can be written
    return scripts


async def test_start_merges_the_sources_into_the_binlog(tmp_path):
    factory, meta = FakeFactory(two_dn_scripts()), FakeMetadata()
    leader = Leader(config(tmp_path), factory=factory, metadata=meta)
    await run_until(leader, lambda: leader.stats.last_tso == 300)
    assert written_tsos(tmp_path) == [100, 200, 300]  # the branches of 100 coalesced: once
    assert [m.cp for m in factory.made] == [None, None]  # first start: no checkpoint
    assert set(leader.nodes) == {1, 2}


async def test_a_restart_resumes_after_the_last_written_key(tmp_path):
    meta = FakeMetadata()
    first = Leader(config(tmp_path), factory=FakeFactory(two_dn_scripts()), metadata=meta)
    await run_until(first, lambda: first.stats.last_tso == 300 and meta.history)
    # The DNs replay everything (from their checkpoints) plus a new transaction at 500.
    scripts = two_dn_scripts()
    scripts[1].batches.append([branch(1, 500, (1,)), mark(1, 600)])
    scripts[2].batches.append([mark(2, 600)])
    factory = FakeFactory(scripts)
    second = Leader(config(tmp_path), factory=factory, metadata=FakeMetadata(history=meta.history))
    await run_until(second, lambda: second.stats.last_tso == 500)
    assert written_tsos(tmp_path) == [100, 200, 300, 500]  # nothing twice
    assert all(m.written == GlobalKey.branch(300) for m in factory.made)
    assert all(m.cp is not None for m in factory.made)  # from the saved checkpoints


async def test_a_dying_source_restarts_the_pipeline_from_the_binlog(tmp_path):
    scripts = two_dn_scripts()
    scripts[2].die = True  # after its batches: the pipeline restarts, dn2 replays them
    factory, meta = FakeFactory(scripts), FakeMetadata()
    leader = Leader(config(tmp_path), factory=factory, metadata=meta)
    replayed = asyncio.Event()

    async def replayed_by_a_new_pipeline() -> None:
        await until(lambda: leader.joint is not None)
        first_joint = leader.joint
        await until(lambda: leader.joint is not first_joint)  # the restarted pipeline's
        await until(lambda: (leader.joint.merger.low_watermark() or ()) >= (400,))
        replayed.set()

    watcher = asyncio.create_task(replayed_by_a_new_pipeline())
    await run_until(leader, replayed.is_set)
    await watcher
    assert written_tsos(tmp_path) == [100, 200, 300]  # the replayed ones dropped
    assert len(factory.made) == 4  # both sources made again
    restarted = factory.made[2:]
    assert all(m.written == GlobalKey.branch(300) for m in restarted)


async def test_a_storage_change_marker_adds_a_source_after_its_tso(tmp_path):
    scripts = {
        1: Script([[branch(1, 100, (1,)), storage_change(1, 200, added=2, dns=[1, 2])]]),
        2: Script([[branch(2, 150, (2,)), branch(2, 300, (2,)), mark(2, 400)]]),
    }
    scripts[1].batches.append([mark(1, 400)])
    factory, meta = FakeFactory(scripts), FakeMetadata()
    leader = Leader(config(tmp_path, dns=(1,)), factory=factory, metadata=meta)
    await run_until(leader, lambda: leader.stats.last_tso == 300)
    # dn2's history before the marker (150) never reaches the global binlog.
    assert written_tsos(tmp_path) == [100, 300]
    joined = factory.made[-1]
    assert joined.node.id == 2 and joined.node.port == 4002  # from the marker
    assert joined.resume_after == GlobalKey.after_tso(200)
    assert joined.names is not None  # joins with a name map, not the first-start path
    assert leader.node(2) == joined.node  # the pipeline's DN set, which service.py asks
    assert [r.kind for r in meta.records] == ["StorageChange"]


async def test_checkpoints_are_saved_only_up_to_the_written_key(tmp_path):
    # dn2's watermark stays at 150: nothing after it can be written, so dn1's checkpoint
    # taken at 400 must not be saved (a restart from it would skip dn1's branch at 200).
    scripts = {
        1: Script([[branch(1, 100, (1, 2)), mark(1, 100)], [branch(1, 200, (1,)), mark(1, 400)]]),
        2: Script([[branch(2, 100, (1, 2)), mark(2, 100)], [branch(2, 120, (2,)), mark(2, 150)]]),
    }
    meta = FakeMetadata()
    leader = Leader(config(tmp_path), factory=FakeFactory(scripts), metadata=meta)
    await run_until(leader, lambda: bool(meta.history) and leader.stats.last_tso == 120)
    await asyncio.sleep(0.1)  # a few more checkpoint rounds
    assert written_tsos(tmp_path) == [100, 120]
    assert meta.history and all(wm <= leader.written_key for wm, _ in meta.history)
    assert {cp.stream for _, cp in meta.history} == {"dn1", "dn2"}


class _GmsAway(FakeMetadata):
    """Checkpoint saves fail (a GMS away) until `back` is set."""

    back = False
    failed = 0

    def save_checkpoints(self, ready, entry) -> None:
        if not self.back:
            self.failed += 1
            raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server")
        super().save_checkpoints(ready, entry)


async def test_checkpoints_wait_for_the_gms_while_writing_goes_on(tmp_path):
    meta = _GmsAway()
    leader = Leader(config(tmp_path), factory=FakeFactory(two_dn_scripts()), metadata=meta)
    task = asyncio.create_task(leader.run())
    try:
        await until(lambda: leader.stats.last_tso == 300 and meta.failed >= 2)
        assert written_tsos(tmp_path) == [100, 200, 300]  # written though nothing was saved
        assert [p["reason"] for p in leader.pauses.snapshot()] == ["gms"]
        assert leader.checkpoints is not None
        assert len(leader.checkpoints.unsaved) <= 2  # the newest per DN only
        meta.back = True
        await until(lambda: meta.history and not leader.pauses.snapshot())
        assert {cp.stream for _, cp in meta.history} == {"dn1", "dn2"}
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
