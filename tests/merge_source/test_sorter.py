"""The release rule (docs/protocol.md, "Ordering"): hand-written scenarios and a property test that
drives a model of the commit protocol through random interleavings."""

from __future__ import annotations

import random
from itertools import count

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.keys import Kind, SortKey
from merge_source.sorter import Release, Sorter, SorterError


def xids(releases: list[Release]) -> list[str | None]:
    return [r.xid for r in releases]


def test_single_branch_released_on_commit():
    s: Sorter[str] = Sorter()
    n = count(1)
    assert s.prepare("a", "A", next(n)) == []
    assert s.commit_record("a", 10, next(n)) == []
    [r] = s.commit("a")
    assert (r.xid, r.payload, r.key.tso) == ("a", "A", 10)
    assert s.watermark == r.key and s.pending == 0


def test_commit_records_in_opposite_order_of_their_tsos():
    # b fetched TSO 5 before a fetched 7, but a's record reached the binlog first.
    s: Sorter[str] = Sorter()
    n = count(1)
    s.prepare("a", "A", next(n))
    s.prepare("b", "B", next(n))
    assert s.commit_record("a", 7, next(n)) == []
    assert s.commit("a") == []  # b, prepared before a's record, is unresolved: a must wait
    assert s.commit_record("b", 5, next(n)) == []  # b is known to be smaller but not committed yet
    assert xids(s.commit("b")) == ["b", "a"]


def test_prepared_branch_blocks_later_ones_until_it_resolves():
    s: Sorter[str] = Sorter()
    n = count(1)
    s.prepare("slow", "S", next(n))
    for i in range(3):
        s.prepare(f"t{i}", i, next(n))
        s.commit_record(f"t{i}", 100 + i, next(n))
        assert s.commit(f"t{i}") == []
    assert s.pending == 4
    # The slow branch's TSO turns out larger than all of them: they go, it waits for its commit.
    assert xids(s.commit_record("slow", 200, next(n))) == ["t0", "t1", "t2"]
    assert xids(s.commit("slow")) == ["slow"]


def test_rollback_after_prepare_unblocks_and_is_dropped():
    s: Sorter[str] = Sorter()
    n = count(1)
    s.prepare("doomed", "D", next(n))
    s.prepare("ok", "O", next(n))
    s.commit_record("ok", 9, next(n))
    assert s.commit("ok") == []
    assert xids(s.rollback("doomed")) == ["ok"]
    assert s.pending == 0


def test_branch_prepared_after_a_record_does_not_block_it():
    s: Sorter[str] = Sorter()
    n = count(1)
    s.prepare("a", "A", next(n))
    s.commit_record("a", 10, next(n))
    s.prepare("late", "L", next(n))  # its TSO will be > 10: no need to wait for it
    assert xids(s.commit("a")) == ["a"]


def test_local_transaction_sorts_after_last_seen_tso():
    s: Sorter[str] = Sorter()
    n = count(1)
    s.prepare("a", "A", next(n))
    s.commit_record("a", 10, next(n))
    assert s.local("L", next(n)) == []  # sorts as (10, LOCAL): after a, which is not committed yet
    released = s.commit("a")
    assert xids(released) == ["a", None]
    assert released[1].key == SortKey(10, Kind.LOCAL, released[1].key.seq)
    s.prepare("b", "B", next(n))
    assert s.local("L2", next(n)) == []  # b was prepared before it and its TSO is still unknown
    assert [r.payload for r in s.commit_record("b", 20, next(n))] == ["L2"]  # 20 > 10: L2 may go
    assert xids(s.commit("b")) == ["b"]


def test_orphans_and_protocol_violations():
    s: Sorter[str] = Sorter()
    n = count(1)
    assert s.commit("never-prepared") == [] and s.orphans == 1
    s.prepare("a", "A", next(n))
    with pytest.raises(SorterError, match="prepared twice"):
        s.prepare("a", "A", next(n))
    s.commit_record("a", 3, next(n))
    with pytest.raises(SorterError, match="two commit records"):
        s.commit_record("a", 4, next(n))


# -- property test ------------------------------------------------------------------------------


def simulate(seed: int, n_txn: int, p_local: float, p_abort: float):
    """Run a random interleaving of the CN commit protocol against one DN.

    Returns (sorter output, expected output). The expected output is what the DN committed,
    sorted by (tso, kind, seq), computed from the model's own knowledge of every TSO.
    """
    rng = random.Random(seed)
    sorter: Sorter[str] = Sorter()
    tso_oracle = 0
    state: dict[str, str] = {}  # xid -> started|prepared|tso|recorded|committed|done
    tso_of: dict[str, int] = {}
    expected: list[tuple[SortKey, str]] = []
    out: list[Release] = []
    max_record_tso = 0
    seq = 0  # mirrors the sorter's sequence: one per binlog observation
    started = 0
    while started < n_txn or any(v != "done" for v in state.values()):
        actions = [x for x, v in state.items() if v != "done"]
        if started < n_txn and (not actions or rng.random() < 0.3):
            if rng.random() < p_local:
                seq += 1
                key = SortKey(max_record_tso, Kind.LOCAL, seq)
                expected.append((key, f"local{started}"))
                out += sorter.local(f"local{started}", seq)
            else:
                state[f"x{started}"] = "started"
            started += 1
            continue
        xid = rng.choice(actions)
        st_ = state[xid]
        if st_ == "started":
            seq += 1
            out += sorter.prepare(xid, xid, seq)
            state[xid] = "prepared"
        elif st_ == "prepared":
            if rng.random() < p_abort:  # CN died before its commit record: recovery rolls back
                seq += 1
                out += sorter.rollback(xid)
                state[xid] = "done"
            else:
                tso_oracle += rng.randint(1, 3)
                tso_of[xid] = tso_oracle
                state[xid] = "tso"
        elif st_ == "tso":
            seq += 1
            max_record_tso = max(max_record_tso, tso_of[xid])
            out += sorter.commit_record(xid, tso_of[xid], seq)
            expected.append((SortKey(tso_of[xid], Kind.BRANCH, seq), xid))
            state[xid] = "recorded"
        elif st_ == "recorded":
            seq += 1
            out += sorter.commit(xid)
            state[xid] = "done"
    return out, sorted(expected), sorter


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n_txn=st.integers(1, 60),
    p_local=st.sampled_from([0.0, 0.1, 0.4]),
    p_abort=st.sampled_from([0.0, 0.1, 0.5]),
)
def test_random_interleavings_release_exactly_the_committed_set_in_order(
    seed, n_txn, p_local, p_abort
):
    out, expected, sorter = simulate(seed, n_txn, p_local, p_abort)
    keys = [r.key for r in out]
    assert keys == sorted(keys) and len(set(keys)) == len(keys), "releases went back"
    assert [(r.key, r.payload) for r in out] == expected
    assert sorter.pending == 0 and sorter.oldest_pending() is None


def test_restart_from_oldest_pending_reproduces_the_same_keys():
    """Re-feeding the binlog from `oldest_pending()` yields the same keys for what was held."""
    log = [
        ("prepare", "a", 1),
        ("record", "a", 10),
        ("commit", "a", None),
        ("prepare", "b", 2),
        ("local", "L", None),
        ("record", "b", 20),
        ("local", "M", None),
    ]

    def run(sorter: Sorter, start: int) -> list[SortKey]:
        out = []
        for seq, (op, x, arg) in enumerate(log, 1):
            if seq < start:
                continue
            if op == "prepare":
                out += sorter.prepare(x, x, seq)
            elif op == "record":
                out += sorter.commit_record(x, arg, seq)
            elif op == "commit":
                out += sorter.commit(x)
            else:
                out += sorter.local(x, seq)
        return [r.key for r in out]

    first = Sorter()
    released = run(first, 1)
    seq, max_tso = first.oldest_pending()
    assert (seq, max_tso) == (4, 10)  # b is held; 10 was the largest TSO before it
    again = Sorter(max_tso_seen=max_tso)
    replay = run(again, seq)
    again_b = again.commit("b")
    first_b = first.commit("b")
    assert [k for k in replay] == [k for k in released if k.seq >= seq]
    assert [r.key for r in again_b] == [r.key for r in first_b]
