"""The k-way merge: global order, coalescing by transaction, TraceId order, missing fragments."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.keys import Kind, SortKey
from merge_joint.merger import MergeError, Merger
from merge_source.fragment import Fragment, FragmentKind, Statement, Watermark


def frag(dn, tso, txn, participants=(), traces=(), kind=Kind.BRANCH, seq=None):
    statements = [Statement(t, [f"dn{dn}-{t}".encode()]) for t in traces]
    fkind = FragmentKind.DATA if kind == Kind.BRANCH else FragmentKind.LOCAL
    return Fragment(
        SortKey(tso, kind, seq if seq is not None else tso),
        dn,
        txn,
        tuple(participants),
        fkind,
        statements,
    )


def wm(dn, tso, kind=Kind.BRANCH, seq=None):
    return Watermark(dn, SortKey(tso, kind, seq if seq is not None else tso))


def test_waits_for_every_watermark_then_coalesces_in_trace_order():
    m = Merger({1: None, 2: None})
    m.push(frag(1, 10, 7, (1, 2), [(1, 0), (3, 0)]))
    m.push(wm(1, 10))
    assert m.pop_ready() == []  # dn2 has said nothing yet
    m.push(frag(2, 10, 7, (1, 2), [(2, 0)]))
    m.push(wm(2, 10))
    [txn] = m.pop_ready()
    assert txn.txn_id == 7 and [s.trace_id for s in txn.statements] == [(1, 0), (2, 0), (3, 0)]
    # a shard-key move: DELETE on dn1 (trace 1.0) comes before the INSERT on dn2 (trace 1.1)
    m.push(frag(2, 20, 8, (1, 2), [(1, 1)]))
    m.push(frag(1, 20, 8, (1, 2), [(1, 0)]))
    m.push(wm(1, 25))
    m.push(wm(2, 20))
    [txn] = m.pop_ready()
    assert [s.events[0] for s in txn.statements] == [b"dn1-(1, 0)", b"dn2-(1, 1)"]


def test_missing_fragment_is_an_error_not_a_silent_drop():
    m = Merger({1: None, 2: None})
    m.push(frag(1, 10, 7, (1, 2), [(1, 0)]))
    m.push(wm(1, 10))
    m.push(wm(2, 11))  # dn2 moved past TSO 10 without delivering its part of txn 7
    with pytest.raises(
        MergeError, match="txn 7 at TSO 10: fragments from DNs \\[1\\] .* participants \\[1, 2\\]"
    ):
        m.pop_ready()


def test_local_transactions_with_equal_tso_order_by_dn():
    m = Merger({1: None, 2: None})
    m.push(frag(2, 10, 0, kind=Kind.LOCAL, seq=5, traces=[None]))
    m.push(wm(2, 10, Kind.LOCAL, 5))
    m.push(wm(1, 10, Kind.LOCAL, 9))  # dn1 may still produce (10, LOCAL, 1, x): wait
    assert m.pop_ready() == []
    m.push(wm(1, 11))
    [txn] = m.pop_ready()
    assert txn.key == (10, Kind.LOCAL, 2, 5)


def test_watermark_going_back_and_late_fragment_are_errors():
    m = Merger({1: None})
    m.push(wm(1, 10))
    with pytest.raises(MergeError, match="went back"):
        m.push(wm(1, 5))
    m.push(frag(1, 12, 3))
    m.push(wm(1, 12))
    m.pop_ready()
    with pytest.raises(MergeError, match="after"):
        m.push(frag(1, 11, 2))


def test_new_source_joins_at_a_tso():
    m = Merger({1: None})
    m.push(frag(1, 10, 1, (1,)))
    m.push(wm(1, 30))
    m.add_source(2, SortKey(20, Kind.BRANCH, 0))  # StorageChange at TSO 20
    assert [t.txn_id for t in m.pop_ready()] == [1]  # 10 < 20: dn2 cannot hold anything there
    m.push(frag(1, 25, 2, (1, 2)))
    m.push(frag(2, 25, 2, (1, 2)))
    assert m.pop_ready() == []
    m.push(wm(2, 25))
    assert [t.txn_id for t in m.pop_ready()] == [2]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), n_dn=st.integers(1, 5), n_txn=st.integers(0, 40))
def test_random_streams_merge_into_exactly_the_global_order(seed, n_dn, n_txn):
    rng = random.Random(seed)
    dns = list(range(1, n_dn + 1))
    streams: dict[int, list] = {dn: [] for dn in dns}
    expected = []
    tso = 0
    seqs = dict.fromkeys(dns, 0)
    for txn in range(1, n_txn + 1):
        tso += rng.randint(1, 3)
        if rng.random() < 0.2:  # a local transaction on one DN, right after `tso`
            dn = rng.choice(dns)
            seqs[dn] += 1
            f = frag(dn, tso, 0, kind=Kind.LOCAL, seq=seqs[dn], traces=[None])
            streams[dn].append(f)
            expected.append(((tso, Kind.LOCAL, dn, seqs[dn]), 0, None))
            continue
        parts = sorted(rng.sample(dns, rng.randint(1, n_dn)))
        traces = [(i, 0) for i in range(1, rng.randint(1, 6))]
        rng.shuffle(traces)
        split = {dn: [] for dn in parts}
        for t in traces:
            split[rng.choice(parts)].append(t)
        for dn in parts:
            seqs[dn] += 1
            # within one DN, statements are in execution order, which is TraceId order
            streams[dn].append(frag(dn, tso, txn, parts, sorted(split[dn]), seq=seqs[dn]))
        expected.append(((tso, Kind.BRANCH, 0, 0), txn, sorted(traces)))
    for dn in dns:  # watermarks: after some fragments, and a final heartbeat beyond everything
        with_marks = []
        for f in streams[dn]:
            with_marks.append(f)
            if rng.random() < 0.5:
                with_marks.append(Watermark(dn, f.key))
        with_marks.append(wm(dn, tso + 100))
        streams[dn] = with_marks
    m = Merger(dict.fromkeys(dns))
    out = []
    cursors = dict.fromkeys(dns, 0)
    while any(cursors[d] < len(streams[d]) for d in dns):
        dn = rng.choice([d for d in dns if cursors[d] < len(streams[d])])
        m.push(streams[dn][cursors[dn]])
        cursors[dn] += 1
        if rng.random() < 0.3:
            out += m.pop_ready()
    out += m.pop_ready()
    got = [(t.key, t.txn_id, [s.trace_id for s in t.statements] if t.txn_id else None) for t in out]
    assert got == expected


def test_a_source_out_of_its_own_order_is_an_error():
    m = Merger({1: None, 2: None})
    m.push(frag(1, 20, 3))
    with pytest.raises(MergeError, match="out of its order"):
        m.push(frag(1, 15, 2))


def test_a_removed_source_still_delivers_what_it_sent():
    m = Merger({1: None, 2: None})
    m.push(frag(2, 10, 4, (2,)))
    m.push(wm(2, 10))
    m.remove_source(2)
    m.push(wm(1, 12))
    assert [t.txn_id for t in m.pop_ready()] == [4]
