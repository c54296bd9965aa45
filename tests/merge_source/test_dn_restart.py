"""A DN restart: branches held then are checked against the DN's XA RECOVER, and one the DN lost
(its XA PREPARE in the binlog, the branch gone from the engine: a kill between the two) is dropped
instead of holding every later release forever. The decision on the recorded bytes of `fixtures/`
(txn 16 is prepared with its record, the DN restarts, its XA COMMIT lands in binlog.000002); the
look at the DN's XA RECOVER on a real DN."""

from __future__ import annotations

import asyncio

import pymysql

from cdc.protocol import BinlogPosition, DumpSettings
from merge_source.fragment import Fragment
from merge_source.processor import SourceProcessor
from merge_source.source import MergeSource
from tests.merge_source.test_recorded import CASES, DN, EVENTS, FDE, coordinate

RESTARTED = next(c for c in CASES if c["name"] == "restart_prepared")


def restarted() -> tuple[SourceProcessor, list]:
    """A processor fed up to the restart's FORMAT_DESCRIPTION in binlog.000002; the rest."""
    processor = SourceProcessor(DN)
    end = coordinate(*RESTARTED["end"])
    i = 0
    while coordinate(EVENTS[i].file, EVENTS[i].pos) < end:
        processor.feed(EVENTS[i])
        i += 1
    while not (EVENTS[i].file == "binlog.000002" and EVENTS[i].data[4] == FDE):
        processor.feed(EVENTS[i])
        i += 1
    processor.feed(EVENTS[i])
    return processor, EVENTS[i + 1 :]


def txns(outputs: list) -> list[int]:
    return [o.txn_id for o in outputs if isinstance(o, Fragment)]


def test_the_restart_makes_the_branches_held_then_suspects():
    processor, _ = restarted()
    assert processor.restart_suspects == {16}
    assert processor.sorter.held(16) is not None


def test_a_branch_the_dn_lost_is_dropped_once_the_binlog_is_read_to_where_the_dn_was():
    processor, rest = restarted()
    upto = ("binlog.000002", rest[0].pos)
    # not read that far yet: nothing decided
    assert processor.settle_lost_branches(set(), upto, ("binlog.000001", 10**6)) == []
    assert processor.restart_suspects == {16}
    processor.settle_lost_branches(set(), upto, upto)
    assert processor.restart_suspects is None and processor.sorter.held(16) is None
    assert 16 not in [t for e in rest for t in txns(processor.feed(e))]  # its COMMIT: an orphan


def test_a_branch_in_xa_recover_is_kept_and_committed_as_recorded():
    processor, rest = restarted()
    upto = ("binlog.000002", rest[0].pos)
    assert processor.settle_lost_branches({16}, upto, upto) == []
    assert processor.restart_suspects is None
    assert 16 in [t for e in rest for t in txns(processor.feed(e))]


def test_a_branch_resolved_in_the_binlog_before_the_check_is_not_dropped():
    processor, rest = restarted()
    out = [t for e in rest for t in txns(processor.feed(e))]  # the XA COMMIT is read first
    assert 16 in out
    end = (rest[-1].file, rest[-1].pos)
    assert processor.settle_lost_branches(set(), end, end) == []  # nothing left to drop


async def test_the_source_asks_the_dn_which_branches_it_still_holds(cluster):
    """The look itself, on a real DN: a branch it holds prepared is listed, another is not."""
    dn = cluster.dn(1)
    conn = pymysql.connect(host="127.0.0.1", port=dn.port, user="root", autocommit=True)
    xid = "'cdc-900000001','1',1"
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS restart_test")
            cur.execute("CREATE TABLE IF NOT EXISTS restart_test.t (id INT PRIMARY KEY)")
            cur.execute(f"XA START {xid}")
            cur.execute("INSERT INTO restart_test.t VALUES (1)")
            cur.execute(f"XA END {xid}")
            cur.execute(f"XA PREPARE {xid}")
        settings = DumpSettings("127.0.0.1", dn.port, "root", "", server_id=9391, name=dn.name)
        source = MergeSource(
            settings, SourceProcessor(1), BinlogPosition("binlog.000001", 4), asyncio.Queue()
        )
        source.processor.restart_suspects = {900000001, 900000002}
        assert await source._settle_lost_branches() == []  # not read up to the DN's end yet
        looked_for, recovered, (file, pos) = source._lost_check
        assert 900000001 in recovered and 900000002 not in recovered
        assert file.startswith("binlog.") and pos > 4
        assert source.processor.restart_suspects == {900000001, 900000002}
        # another restart before that look settled: new suspects, a new look
        source.processor.restart_suspects = {900000001, 900000002, 900000003}
        assert await source._settle_lost_branches() == []
        assert source._lost_check[0] is source.processor.restart_suspects
        assert source._lost_check[0] is not looked_for
    finally:
        with conn.cursor() as cur:
            cur.execute(f"XA ROLLBACK {xid}")
        conn.close()
