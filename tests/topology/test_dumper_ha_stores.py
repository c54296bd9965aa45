"""Dumper HA state on the real GMS: the lease (one holder, terms, fencing by term), term starts,
members, and checkpoints kept by watermark."""

from __future__ import annotations

import time

from tests.topology.test_stores import meta  # noqa: F401 (fixture)
from topology.checkpoints import Checkpoint, CheckpointHistory
from topology.dumper_lease import DumperLeaseStore, Member, ServedBound, TermStart


def test_lease_one_holder_new_term_after_expiry(meta):  # noqa: F811
    store = DumperLeaseStore(*meta)
    assert store.current() is None
    assert store.try_acquire(1, "h:1", 400) == 1
    assert store.try_acquire(2, "h:2", 400) is None  # live lease: nobody else
    assert store.renew(1, 1, 400)
    lease = store.current()
    assert (lease.holder, lease.term, lease.live) == (1, 1, True)
    time.sleep(0.5)
    assert not store.current().live
    assert not store.renew(1, 1, 400)  # expired: the holder is fenced, no silent revival
    assert store.try_acquire(2, "h:2", 400) == 2
    assert not store.renew(1, 1, 400)  # an old term never renews
    store.release(2, 2)
    assert store.try_acquire(1, "h:1", 400) == 3

    store.record_term(TermStart(2, 2, "binlog.000003", 1234))
    store.record_term(TermStart(3, 1, "binlog.000004", 4))
    assert [t.term for t in store.terms_after(1)] == [2, 3]
    # Each stream of a multi-stream binlog has its own start per term, recorded once.
    store.record_term(TermStart(2, 2, "binlog.000002", 500, stream=1))
    store.record_term(TermStart(2, 2, "binlog.000009", 9, stream=1))  # a restart: ignored
    store.record_term(TermStart(3, 1, "binlog.000001", 4, stream=0))
    assert store.terms_after(1, stream=1) == [TermStart(2, 2, "binlog.000002", 500, 1)]
    assert [t.term for t in store.terms_after(2, stream=0)] == [3]
    assert [t.term for t in store.terms_after(1)] == [2, 3]
    store.report(Member(1, "h:1", "leader", 3, "binlog.000004", 900, 0))
    store.report(Member(1, "h:1", "leader", 3, "binlog.000004", 950, 0))
    (m,) = store.members()
    assert (m.position, m.role) == (950, "leader") and m.age_s < 5
    assert m.streams == ()
    # A multi-stream member: its copy's end in each stream, for the election.
    ends = (("binlog.000002", 300), ("", 0))
    store.report(Member(2, "h:2", "follower", 3, "", 77, 0, ends))
    store.report(Member(2, "h:2", "follower", 3, "", 78, 0, (ends[0], ("binlog.000001", 4))))
    assert store.members()[1].streams == (("binlog.000002", 300), ("binlog.000001", 4))


def test_served_bound_recorded_only_under_the_terms_live_lease(meta):  # noqa: F811
    store = DumperLeaseStore(*meta)
    assert store.try_acquire(1, "h:1", 2000) == 1
    store.record_term(TermStart(1, 1, "binlog.000001", 4))
    assert store.served_bounds() == [(TermStart(1, 1, "binlog.000001", 4), None)]
    assert store.record_served(1, 1, "binlog.000001", 900)
    assert store.record_served(1, 1, "binlog.000002", 120)
    assert not store.record_served(1, 2, "binlog.000009", 4)  # not the holder
    (start, bound), *_ = store.served_bounds()
    assert bound == ServedBound(1, 1, "binlog.000002", 120)
    store.release(1, 1)
    assert not store.record_served(1, 1, "binlog.000003", 4)  # the lease is gone
    assert store.try_acquire(2, "h:2", 2000) == 2
    store.record_term(TermStart(2, 2, "binlog.000002", 120))
    assert not store.record_served(1, 1, "binlog.000003", 4)  # an old term never records
    assert [b for _, b in store.served_bounds()] == [ServedBound(1, 1, "binlog.000002", 120), None]


def test_a_streams_served_bound_recorded_only_under_the_terms_live_lease(meta):  # noqa: F811
    """Several streams: each stream process records its own stream's bound in its row of the
    term (migration 7), under the same condition; the streams' bounds and the single
    stream's never mix."""
    store = DumperLeaseStore(*meta)
    assert store.try_acquire(1, "h:1", 2000) == 1
    for stream in (0, 1):
        store.record_term(TermStart(1, 1, "binlog.000001", 4, stream=stream))
    assert store.served_bounds(1) == [(TermStart(1, 1, "binlog.000001", 4, 1), None)]
    assert not store.record_served(1, 1, "binlog.000001", 900, stream=2)  # no such row
    assert store.record_served(1, 1, "binlog.000001", 900, stream=1)
    assert store.record_served(1, 1, "binlog.000002", 120, stream=1)
    assert not store.record_served(1, 2, "binlog.000009", 4, stream=1)  # not the holder
    assert [b for _, b in store.served_bounds(1)] == [ServedBound(1, 1, "binlog.000002", 120, 1)]
    assert [b for _, b in store.served_bounds(0)] == [None]
    assert store.served_bounds() == []  # the single stream's table: untouched
    store.release(1, 1)
    assert not store.record_served(1, 1, "binlog.000003", 4, stream=0)  # the lease is gone
    assert store.try_acquire(2, "h:2", 2000) == 2
    store.record_term(TermStart(2, 2, "binlog.000002", 120, stream=1))
    assert not store.record_served(1, 1, "binlog.000003", 4, stream=1)  # an old term never
    assert store.record_served(2, 2, "binlog.000002", 500, stream=1)
    assert [b for _, b in store.served_bounds(1)] == [
        ServedBound(1, 1, "binlog.000002", 120, 1),
        ServedBound(2, 2, "binlog.000002", 500, 1),
    ]
    assert [b for _, b in store.served_bounds(0)] == [None]


def test_checkpoint_history_newest_at_or_below_a_key(meta):  # noqa: F811
    history = CheckpointHistory(*meta)
    assert not history.has("dn1")
    history.save((100, 0, 0, 0), Checkpoint("dn1", "binlog.000001", 400, 90))
    history.save((200, 1, 2, 5), Checkpoint("dn1", "binlog.000001", 800, 190))
    history.save((300, 0, 0, 0), Checkpoint("dn1", "binlog.000002", 4, 290))
    assert history.has("dn1")
    assert history.at_or_below("dn1", (99, 9, 9, 9)) is None
    assert history.at_or_below("dn1", (200, 1, 2, 5)).position == 800
    assert history.at_or_below("dn1", (250, 0, 0, 0)).position == 800
    assert history.at_or_below("dn1", (10**18, 0, 0, 0)).file == "binlog.000002"
    history.prune("dn1", 3600)  # nothing old enough
    assert history.at_or_below("dn1", (150, 0, 0, 0)).position == 400
