"""A degraded gate's bound (docs/dumper.md): a candidate whose copy ends before how far the
newest term's leader served (its served bound, recorded in the GMS while its gate was
degraded) does not take over; the old leader, back with the longest copy, does. With
`degraded_takeover_after_s` the candidate takes over anyway after that long, loudly. With
several streams the same per stream: each stream process records its stream's bound, and a
copy behind it in any stream holds the takeover."""

from __future__ import annotations

import asyncio
import logging
import shutil

from cdc.config import DumperPeer
from cdc_cli.commands.pipeline import _ha_line
from dumper.ha import HaNode, ha_status
from dumper.ha.copies import CopyTarget, end_of, save_state_term
from dumper.ha.served_bound import BoundRecorder, standing_bound
from dumper.server import AckGate
from tests.dumper.ha.fakes import (
    LEASE_MS,
    Cluster,
    FakeCopy,
    FakeGms,
    FakeLeaders,
    FakeLeaseStore,
    Node,
)
from tests.dumper.pipeline.fakes import config
from tests.dumper.test_retention import write_files
from topology import ServedBound, TermStart

PEERS = (1, 2)


def copy_end(node: Node) -> tuple[str, int]:
    return end_of(CopyTarget(None, node.ha.dir), "binlog")


async def a_leader_that_served_past_its_follower(c: Cluster) -> Node:
    """Dumper 1 leads term 1, writes, records its served bound at its end (as its degraded
    gate would have), then is cut off (killed, for the GMS)."""
    a = c.node(1, peers=PEERS)
    await c.until(lambda: a.leaders.built and a.leader.stats.last_tso == 300)
    file, pos = copy_end(a)
    assert await a.store.record_served(1, 1, file, pos)
    a.store.cut()
    await c.until(lambda: not c.gms.live(), timeout=5)
    return a


async def test_a_candidate_behind_the_bound_waits_for_the_old_leader(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="dumper.ha.served_bound")
    async with Cluster(tmp_path) as c:
        a = await a_leader_that_served_past_its_follower(c)
        b = c.node(2, peers=PEERS)  # its copy is empty (FakeCopy): behind the bound
        await c.until(lambda: c.gms.calls(2, "served_bound") >= 5)
        await asyncio.sleep(3 * LEASE_MS / 1000)
        assert b.ha.role != "leader" and c.gms.calls(2, "try_acquire") == 0
        waits = ha_status(b.ha)["takeover_waits_for"]
        assert (waits["term"], waits["holder"]) == (1, 1)
        assert (waits["served_file"], waits["served_position"]) == copy_end(a)
        said = [r.getMessage() for r in caplog.records if "not taking over" in r.getMessage()]
        assert len(said) == 1 and "waiting for dumper 1" in said[0]  # once per term
        # The old leader comes back: its copy reaches the bound, it takes term 2, B follows.
        a.store.restore()
        await c.until(lambda: a.ha.role == "leader" and a.ha.term == 2)
        await c.until(lambda: b.copy.leases and b.copy.leases[-1].holder == 1)
        assert "takeover_waits_for" not in ha_status(b.ha)


async def test_a_copy_that_reaches_the_bound_takes_over_at_once(tmp_path):
    async with Cluster(tmp_path) as c:
        a = await a_leader_that_served_past_its_follower(c)
        b = c.node(2, peers=PEERS, start=False)
        for path in a.ha.dir.iterdir():  # B had copied all A wrote (and A served)
            if path.is_file():
                shutil.copy(path, b.ha.dir / path.name)
        assert copy_end(b) == copy_end(a)
        c.start(b)
        await c.until(lambda: b.ha.role == "leader", timeout=5)
        assert b.ha.term == 2 and "takeover_waits_for" not in ha_status(b.ha)


async def test_degraded_takeover_after_s_trades_the_wait_for_availability(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="dumper.ha.served_bound")
    async with Cluster(tmp_path) as c:
        await a_leader_that_served_past_its_follower(c)
        b = c.node(2, peers=PEERS, degraded_takeover_after_s=1.0)
        await c.until(lambda: c.gms.calls(2, "served_bound") >= 1)
        waited = asyncio.get_running_loop().time()
        await c.until(lambda: b.ha.role == "leader", timeout=10)
        assert asyncio.get_running_loop().time() - waited >= 0.9
        said = [r.getMessage() for r in caplog.records if "taking over although" in r.getMessage()]
        assert len(said) == 1 and "fork" in said[0]


def test_the_standing_bound_is_the_furthest_unless_a_later_term_began_before_it():
    def start(term: int, pos: int, by: int = 1) -> TermStart:
        return TermStart(term, by, "binlog.000001", pos)

    def bound(term: int, pos: int, by: int = 1) -> ServedBound:
        return ServedBound(term, by, "binlog.000001", pos)

    assert standing_bound([]) is None
    assert standing_bound([(start(1, 4), None), (start(2, 900), None)]) is None
    # The old leader, back from a degraded term 1, began term 2 at its end and died before a
    # consumer of term 2 asked for a bound: term 1's still stands.
    assert standing_bound([(start(1, 4), bound(1, 800)), (start(2, 900), None)]) == bound(1, 800)
    assert standing_bound([(start(1, 4), bound(1, 800)), (start(2, 900), bound(2, 1200, 2))]) == (
        bound(2, 1200, 2)
    )
    # A term forced below the bound (degraded_takeover_after_s): that history is gone.
    assert standing_bound([(start(1, 4), bound(1, 800)), (start(2, 500, 2), None)]) is None


# -- several streams (docs/streams.md, "HA followers") ----------------------------------------


def stream_candidate(tmp_path, gms: FakeGms, degraded_takeover_after_s: float = 0.0) -> HaNode:
    """Dumper 2 of a 2-stream group, alone: each stream copy 2 files, a prefix of term 1
    (which dumper 1 led, beginning at binlog.000001:4 in both streams); the lease is free."""
    cfg = config(tmp_path / "binlog")
    cfg.dumper.streams, cfg.dumper.id, cfg.dumper.port = 2, 2, 3304
    cfg.dumper.peers = [DumperPeer(i, port=3301 + (i - 1) * 3) for i in PEERS]
    cfg.dumper.degraded_takeover_after_s = degraded_takeover_after_s
    node = HaNode(cfg, FakeLeaseStore(gms, 2), FakeLeaders(cfg), copy=FakeCopy())
    for c in node.copies:
        write_files(c.dir, files=2, size=2048).close()
        save_state_term(c.dir, 1)
        gms.terms.append(TermStart(1, 1, "binlog.000001", 4, stream=c.stream))
    gms.hold(1, "h:3301", lease_ms=0)  # term 1's lease, run out
    return node


async def test_a_stream_copy_behind_its_streams_bound_holds_the_takeover(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="dumper.ha.served_bound")
    gms = FakeGms()
    node = stream_candidate(tmp_path, gms)
    assert node.hold is not None and node.acks is None  # (each stream process gates its port)
    (f0, p0), (f1, p1) = node.copy_ends()
    assert await node.may_take_over()  # no bound: as before
    # Stream 0's gate served within this copy; stream 1's past it.
    gms.served[(1, 0)] = (f0, p0 - 100)
    gms.served[(1, 1)] = (f1, p1 + 100)
    for _ in range(3):
        assert not await node.may_take_over()
    waits = ha_status(node)["takeover_waits_for"]
    assert (waits["stream"], waits["term"], waits["holder"]) == (1, 1, 1)
    assert (waits["served_file"], waits["served_position"]) == (f1, p1 + 100)
    assert (waits["copy_file"], waits["copy_position"]) == (f1, p1)
    said = [r.getMessage() for r in caplog.records if "not taking over" in r.getMessage()]
    assert len(said) == 1, said  # once per term
    assert f"stream 1: term 1's leader (dumper 1) served consumers up to {f1}:{p1 + 100}" in said[0]
    assert "stream 0" not in said[0] and "waiting for dumper 1" in said[0]
    line = _ha_line(ha_status(node))
    assert "NOT TAKING OVER: stream 1: term 1's leader (dumper 1)" in line
    # The bound of the single stream's table says nothing of these streams.
    gms.terms.append(TermStart(1, 1, "binlog.000001", 4))
    gms.served[1] = ("binlog.000009", 4)
    assert not await node.may_take_over()
    del gms.served[1]
    # A copy that reaches every stream's bound takes over.
    gms.served[(1, 1)] = (f1, p1)
    assert await node.may_take_over()
    assert "takeover_waits_for" not in ha_status(node)


async def test_a_later_term_begun_below_a_streams_bound_drops_it(tmp_path):
    gms = FakeGms()
    node = stream_candidate(tmp_path, gms)
    (_, _), (f1, p1) = node.copy_ends()
    gms.served[(1, 1)] = (f1, p1 + 100)
    assert not await node.may_take_over()
    # Term 2 was forced below it (degraded_takeover_after_s), in stream 1: that history is
    # gone; its start at this copy's end leaves the copy whole.
    gms.terms.append(TermStart(2, 3, f1, p1, stream=1))
    assert await node.may_take_over()


async def test_degraded_takeover_after_s_overrides_a_streams_bound(tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="dumper.ha.served_bound")
    gms = FakeGms()
    node = stream_candidate(tmp_path, gms, degraded_takeover_after_s=0.3)
    (f0, p0), (f1, p1) = node.copy_ends()
    gms.served[(1, 0)] = (f0, p0 + 7)
    gms.served[(1, 1)] = (f1, p1 + 100)
    assert not await node.may_take_over()
    said = [r.getMessage() for r in caplog.records if "not taking over" in r.getMessage()]
    assert "stream 0: term 1" in said[0] and "; stream 1: term 1" in said[0]
    assert ha_status(node)["takeover_waits_for"]["streams"] == [0, 1]
    await asyncio.sleep(0.35)
    assert await node.may_take_over()
    said = [r.getMessage() for r in caplog.records if "taking over although" in r.getMessage()]
    assert len(said) == 1 and "stream 1: term 1" in said[0] and "fork" in said[0]


async def test_a_stream_process_records_its_streams_bound_while_the_lease_is_live(tmp_path):
    """The stream process's `BoundRecorder` writes its stream's row, once a held dump asks."""
    cfg = config(tmp_path / "binlog")
    cfg.dumper.id = 1
    gms = FakeGms()
    term = gms.hold(1, "h:3301", lease_ms=5000)
    gms.terms.append(TermStart(term, 1, "binlog.000001", 4, stream=1))
    gate = AckGate([9902], live_ms=700, wait_ms=10)
    recorder = BoundRecorder(cfg.dumper, FakeLeaseStore(gms, 1), gate, stream=1)
    gate.bound = recorder.current
    run = asyncio.create_task(recorder.run(term, lambda: ("binlog.000001", 900)))
    try:
        # Degraded, no bound recorded yet ((0, 0)): the dump is held and asks for one.
        assert not gate.give_up("binlog.000001", 120, 0.02)
        assert gate.degraded and gate.wants == (1, 120)
        await asyncio.wait_for(_until(lambda: recorder.recorded is not None), 5)
        assert gms.served == {(term, 1): ("binlog.000001", 900)}
        assert recorder.current() == (1, 900) and recorder.records == 1
        assert gms.calls(1, "record_served") == 1  # one write per step, not per look
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.01)
