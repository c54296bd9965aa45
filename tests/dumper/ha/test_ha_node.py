"""The HA state machine without a cluster: `HaNode`s on an in-memory lease store (the GMS),
each leading with the fake pipeline of tests/dumper/pipeline/ (a real BinlogWriter in its own
temp dir) and following with a copy that copies nothing. Leases last LEASE_MS (fakes.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

from cdc.binlog.constants import STOP_EVENT
from cdc.binlog.reader import read_file
from dumper.ha import FencedError, ha_status
from dumper.ha.copies import STATE_FILE, save_state_term
from dumper.pipeline import Leader
from tests.dumper.ha.fakes import LEASE_MS, Cluster, Node
from tests.dumper.pipeline.fakes import written_tsos
from topology import TermStart


def state_term(node: Node) -> int:
    """The term whose stream the node's copy is a prefix of (0: none recorded)."""
    path = node.ha.dir / STATE_FILE
    return json.loads(path.read_text())["term"] if path.exists() else 0


def copies(node: Node, term: int) -> bool:
    """The node copies the stream of `term` (`HaNode.term` changes before the copy starts)."""
    return bool(node.copy.leases) and node.copy.leases[-1].term == term


def fenced(leader: Leader) -> bool:
    try:
        leader.fence()  # type: ignore[misc]  # an HA leader has one
    except FencedError:
        return True
    return False


async def test_a_candidate_leads_when_the_lease_is_free(tmp_path):
    async with Cluster(tmp_path) as c:
        a = c.node(1)
        await c.until(lambda: a.leaders.built and a.leader.stats.last_tso == 300)
        assert (a.ha.role, a.ha.term, a.leader.term) == ("leader", 1, 1)
        assert a.ha.leader is a.leader and len(a.leaders.built) == 1
        assert not fenced(a.leader)
        assert written_tsos(a.ha.dir) == [100, 200, 300]
        # The term recorded where it began (a fresh dir: the first file's first event) and
        # the copy is now a prefix of term 1's stream.
        assert c.gms.terms == [TermStart(1, 1, "binlog.000001", 4)]
        assert state_term(a) == 1
        assert (c.gms.holder, c.gms.epoch, c.gms.live()) == (1, 1, True)
        assert a.copy.leases == []
        assert ha_status(a.ha)["role"] == "leader"


async def test_a_second_node_follows_while_the_lease_is_held(tmp_path):
    async with Cluster(tmp_path) as c:
        a = c.node(1)
        await c.until(lambda: a.ha.role == "leader")
        b = c.node(2)
        await c.until(lambda: b.copy.leases)
        lease = b.copy.leases[0]
        assert (lease.holder, lease.address, lease.term) == (1, "127.0.0.1:3301", 1)
        assert (b.ha.role, b.ha.term, state_term(b)) == ("follower", 1, 1)
        assert b.leaders.standbys >= 1  # ready for a takeover
        # Several renewals later nothing changed: B never tried to take the lease.
        renewed = c.gms.calls(1, "renew")
        await c.until(lambda: c.gms.calls(1, "renew") >= renewed + 3)
        assert (a.ha.role, b.ha.role) == ("leader", "follower")
        assert c.gms.calls(2, "try_acquire") == 0
        assert b.leaders.built == [] and len(b.copy.leases) == 1
        assert ha_status(b.ha)["leader"] == "127.0.0.1:3301"


async def test_a_leader_that_cannot_renew_fences_itself_and_steps_down(tmp_path):
    async with Cluster(tmp_path) as c:
        a = c.node(1)
        await c.until(lambda: a.leaders.built and a.leader.stats.last_tso == 300)
        old = a.leader
        a.store.cut()  # the GMS stops answering: renewals hang
        await c.until(lambda: a.ha.role != "leader")
        assert fenced(old)  # its writes raise FencedError from now on
        assert old.writer.closed and a.ha.leader is None
        # Back in touch with the GMS, it finds its lease expired (it did not release it: too
        # late for that) and wins the next term.
        fenced_when_acquired: list[bool] = []
        c.gms.on_acquire.append(lambda _: fenced_when_acquired.append(fenced(old)))
        a.store.restore()
        await c.until(lambda: a.ha.role == "leader" and a.ha.leader is not None)
        assert fenced_when_acquired == [True]
        assert (a.ha.term, a.leader.term, len(a.leaders.built)) == (2, 2, 2)
        assert a.leader is not old
        assert [t.term for t in c.gms.terms] == [1, 2]
        assert state_term(a) == 2
        assert c.gms.calls(1, "release") == 0


async def test_slow_renewals_within_the_lease_keep_it(tmp_path):
    """Each renewal answers after 0.3 s, well within the lease's 1.0 s (1.2 s less the
    margin): the next one goes lease_renew_ms (0.5 s) after the last was sent, so each has
    0.5 s to answer. Counted from the answer instead (before the nemesis run found it), the
    next went at +0.8 s with 0.2 s left, timed out and fenced a healthy leader: a takeover
    every second."""
    async with Cluster(tmp_path) as c:
        a = c.node(1, start=False)
        a.ha.config.dumper.lease_ms, a.ha.config.dumper.lease_renew_ms = 1200, 500
        a.store.renew_s = 0.3
        c.start(a)
        await c.until(lambda: a.ha.role == "leader")
        renewed = c.gms.calls(1, "renew")
        await c.until(lambda: c.gms.calls(1, "renew") >= renewed + 5)
        assert (a.ha.role, a.ha.term, c.gms.epoch) == ("leader", 1, 1)
        assert not fenced(a.leader)


@contextlib.asynccontextmanager
async def _set_on_exit(event: asyncio.Event):
    try:
        yield
    finally:
        event.set()


def event_types(binlog_dir) -> list[int]:
    """The type code of every event in the node's binlog files, in order."""
    out: list[int] = []
    for path in sorted(binlog_dir.glob("binlog.[0-9]*")):
        _, reader = read_file(path)
        out += [raw.type_code for raw in reader]
    return out


async def test_a_fenced_leader_steps_down_at_once_whatever_its_tasks_wait_for(tmp_path):
    """Issue 39: a leader cut off from the GMS whose heartbeat hangs on that dead link (and
    swallows cancels, as a thread-bound call would) stopped writing only once the heartbeat
    gave up, 23 s past its lease. It steps down when the lease runs out, writes no STOP event
    (a byte no successor holds) and serves acknowledged data only until it is aligned with the
    next term; while a renewal is overdue its lease is no longer "sure"."""

    released = asyncio.Event()

    async def stuck_heartbeat() -> None:
        while not released.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await released.wait()

    async with Cluster(tmp_path) as c, _set_on_exit(released):
        a = c.node(1, on_lead=stuck_heartbeat)
        await c.until(lambda: a.leaders.built and a.leader.stats.last_tso == 300)
        assert a.ha.gated() and a.ha.sure_until() > time.monotonic()
        old = a.leader
        assert old.sure_until() == a.ha.sure_until()  # the term's (a merge tells its streams)
        a.store.cut()
        cut_at = time.monotonic()
        await c.until(lambda: a.ha.sure_until() <= time.monotonic(), timeout=2)
        assert a.ha.role == "leader"  # in doubt, not yet fenced: acknowledged data only
        await c.until(lambda: a.ha.role != "leader", timeout=5)
        took = time.monotonic() - cut_at
        # Within the lease (less its margin) and a renewal's timeout: not after the heartbeat.
        assert took < LEASE_MS / 1000 + 0.5, took
        assert fenced(old) and a.ha.gated() and a.ha.sure_until() == 0.0 == old.sure_until()
        assert STOP_EVENT not in event_types(a.ha.dir)
        assert written_tsos(a.ha.dir) == [100, 200, 300]
        # Another dumper leads term 2 meanwhile; once A reaches the GMS again it cuts its copy
        # back to where term 2 began, and only then serves its copy whole.
        c.gms.expires_at = 0
        c.gms.hold(2, "127.0.0.1:3302", lease_ms=60_000)
        c.gms.terms.append(TermStart(2, 2, "binlog.000001", 4))
        a.store.restore()
        await c.until(lambda: copies(a, term=2))
        assert not a.ha.gated() and written_tsos(a.ha.dir) == []


async def test_a_follower_takes_over_when_the_lease_expires(tmp_path):
    async with Cluster(tmp_path) as c:
        a = c.node(1)
        await c.until(lambda: a.leaders.built and a.leader.stats.last_tso == 300)
        b = c.node(2)
        await c.until(lambda: b.copy.leases)
        old = a.leader
        fenced_when_acquired: list[tuple[int, bool]] = []
        c.gms.on_acquire.append(lambda holder: fenced_when_acquired.append((holder, fenced(old))))
        a.store.cut()  # dumper 1 is gone for the GMS: it cannot renew, nobody hears from it
        await c.until(lambda: b.leaders.built and b.leader.stats.last_tso == 300)
        # The lease went to B only once A could no longer write.
        assert fenced_when_acquired == [(2, True)]
        assert (b.ha.role, b.ha.term, b.leader.term) == ("leader", 2, 2)
        assert a.ha.role != "leader" and old.writer.closed
        assert (c.gms.holder, c.gms.epoch) == (2, 2)
        assert c.gms.terms == [
            TermStart(1, 1, "binlog.000001", 4),
            TermStart(2, 2, "binlog.000001", 4),  # B's copy was empty (FakeCopy)
        ]
        assert state_term(b) == 2
        # A comes back and follows B. What it wrote in term 1 and B never copied is cut back
        # to where term 2 began, before it copies term 2's stream.
        assert written_tsos(a.ha.dir) == [100, 200, 300]
        a.store.restore()
        await c.until(lambda: copies(a, term=2))
        assert a.copy.leases[-1].holder == 2
        assert (a.ha.role, a.ha.term, state_term(a)) == ("follower", 2, 2)
        assert written_tsos(a.ha.dir) == []


async def test_a_follower_copies_a_term_only_once_it_recorded_its_start(tmp_path):
    async with Cluster(tmp_path) as c:
        # Dumper 3 (no node of this test) won term 1 and has not recorded its start yet.
        c.gms.hold(3, "127.0.0.1:3303", lease_ms=60_000)
        b = c.node(2)
        await c.until(lambda: c.gms.calls(2, "terms_after") >= 3)
        assert (b.ha.role, b.ha.term, state_term(b)) == ("follower", 1, 0)
        assert b.copy.leases == []  # it could hold bytes the new term cuts
        c.gms.terms.append(TermStart(1, 3, "binlog.000001", 4))
        await c.until(lambda: b.copy.leases)
        assert state_term(b) == 1


async def test_a_follower_copies_on_within_the_term_its_copy_belongs_to(tmp_path):
    """Restarted (or re-seeded, or after its dump broke) during the term whose stream its copy
    is a prefix of, a follower copies on: no new term needed."""
    async with Cluster(tmp_path) as c:
        c.gms.hold(3, "127.0.0.1:3303", lease_ms=60_000)
        c.gms.terms.append(TermStart(1, 3, "binlog.000001", 4))
        b = c.node(2, start=False)
        save_state_term(b.ha.dir, 1)  # as an earlier run of it in term 1 left it
        c.start(b)
        await c.until(lambda: b.copy.leases)
        assert (b.ha.role, b.copy.leases[-1].term, state_term(b)) == ("follower", 1, 1)


async def test_of_equal_copies_the_lowest_id_takes_over(tmp_path):
    async with Cluster(tmp_path) as c:
        c.gms.hold(3, "127.0.0.1:3303")  # a leader that dies at once: never renewed
        c.gms.terms.append(TermStart(1, 3, "binlog.000001", 4))
        b, d = c.node(2), c.node(4)
        # (each may first follow dumper 3 for as long as its lease lives)
        await c.until(lambda: b.ha.role == "leader" and copies(d, term=2))
        assert (b.ha.term, d.ha.role, d.copy.leases[-1].holder) == (2, "follower", 2)
        assert c.gms.calls(4, "try_acquire") == 0  # it saw B's copy as good as its own
