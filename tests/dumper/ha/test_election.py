"""Who takes over a free lease (`dumper/ha/election.py`): the rule on its own, then a
multi-stream `HaNode` that reports its copy's end per stream and yields to a member furthest
in more streams (the in-memory lease store of fakes.py)."""

from __future__ import annotations

import random

from dumper.ha import HaNode
from dumper.ha.election import member_ends, order, winner
from tests.dumper.ha.fakes import FakeCopy, FakeGms, FakeLeaders, FakeLeaseStore
from tests.dumper.pipeline.fakes import config
from tests.dumper.test_retention import write_files
from topology import Member


def at(*ends: tuple[int, int]) -> list[tuple[str, int]]:
    """Ends per stream from (file number, position) pairs (file 0: no file yet)."""
    return [(f"binlog.{n:06d}" if n else "", pos) for n, pos in ends]


def test_one_stream_the_furthest_copy_then_the_lowest_id():
    assert winner({1: at((3, 100)), 2: at((4, 4)), 3: at((3, 900))}) == 2
    assert winner({3: at((4, 500)), 2: at((4, 500)), 4: at((4, 499))}) == 2
    assert winner({2: at((0, 0)), 5: at((1, 4))}) == 5


def test_streams_furthest_in_the_most_streams_wins():
    # 1 is far ahead in stream 0 (a file more: the larger sum) but behind in streams 1 and 2,
    # where 2 is furthest: taking 1 would cut back what 2 acknowledged in two streams.
    one = at((9, 100), (2, 100), (2, 100))
    two = at((8, 100), (2, 200), (2, 200))
    assert winner({1: one, 2: two}) == 2
    # Level in as many streams: the larger sum; then the lowest id.
    assert winner({1: at((2, 10), (1, 50)), 2: at((1, 20), (2, 4))}) == 1
    assert winner({4: at((2, 10), (1, 50)), 3: at((2, 10), (1, 50))}) == 3


def test_a_member_without_stream_ends_is_compared_by_its_sum():
    """(A version that reported only ("", sum) during an upgrade.)"""
    new = at((1, 100), (1, 100))
    old_ahead = [("", sum((1 << 40) + p for _, p in at((1, 150), (1, 100))))]
    assert winner({1: new, 2: old_ahead}) == 2
    assert winner({1: new, 2: [("", 5)]}) == 1


def test_a_member_furthest_in_every_stream_always_wins():
    rng = random.Random(34)
    for _ in range(500):
        streams = rng.randint(1, 4)
        members = {
            i: at(*((rng.randint(0, 3), rng.randint(4, 1000)) for _ in range(streams)))
            for i in rng.sample(range(1, 9), rng.randint(2, 4))
        }
        top = [max(order(*ends[s]) for ends in members.values()) for s in range(streams)]
        best = [i for i, ends in members.items() if [order(*e) for e in ends] == top]
        if best:
            assert winner(members) == min(best)


async def test_a_stream_follower_yields_to_one_furthest_in_more_streams(tmp_path):
    cfg = config(tmp_path / "binlog")
    cfg.dumper.streams = 2
    cfg.dumper.id = 2
    store = FakeLeaseStore(FakeGms(), 2)
    node = HaNode(cfg, store, FakeLeaders(cfg), copy=FakeCopy())
    for c in node.copies:
        write_files(c.dir, files=2, size=2048).close()  # both copies end in binlog.000002
    mine = node.copy_ends()
    assert [f for f, _ in mine] == ["binlog.000002"] * 2
    assert await node.may_take_over()  # alone

    (f0, p0), (f1, p1) = mine
    behind_in_one = Member(3, "h:3", "follower", 1, "", 0, 0.0, ((f0, p0 + 1), (f1, p1 - 2)))
    await FakeLeaseStore(store.gms, 3).report(behind_in_one)
    assert await node.may_take_over()  # each furthest in one stream: our sum is larger
    ahead_in_both = Member(3, "h:3", "follower", 1, "", 0, 0.0, ((f0, p0 + 1), (f1, p1)))
    await FakeLeaseStore(store.gms, 3).report(ahead_in_both)
    assert not await node.may_take_over()
    assert member_ends(ahead_in_both) == ahead_in_both.streams
