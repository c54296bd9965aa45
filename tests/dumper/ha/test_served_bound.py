"""A degraded gate's bound (docs/dumper.md): a candidate whose copy ends before how far the
newest term's leader served (its served bound, recorded in the GMS while its gate was
degraded) does not take over; the old leader, back with the longest copy, does. With
`degraded_takeover_after_s` the candidate takes over anyway after that long, loudly."""

from __future__ import annotations

import asyncio
import logging
import shutil

from dumper.ha import ha_status
from dumper.ha.copies import CopyTarget, end_of
from dumper.ha.served_bound import standing_bound
from tests.dumper.ha.fakes import LEASE_MS, Cluster, Node
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
