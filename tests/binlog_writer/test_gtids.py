"""GTID numbering by the writer: gapless gnos across batches, files, restarts, crashes and
aborted streams; each file's PREVIOUS_GTIDS holds the set before it; a DDL may carry two."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter
from binlog_writer.gtids import GTID_EVENT_SIZE, MysqlGtids, find, previous_gtids
from cdc.binlog.constants import GTID_EVENT, EventType
from cdc.binlog.errors import CodecError
from cdc.binlog.events import MysqlGtidEvent, encode_event
from cdc.binlog.gtid import GtidSet, gtid_text, sid_of
from cdc.binlog.reader import iter_events
from tests.binlog_writer.test_recovery import readable
from tests.binlog_writer.test_stream import raw

SID = sid_of("3e11fa47-71ca-11e1-9e33-c80aa9429562")
PLACEHOLDER = encode_event(MysqlGtidEvent(GTID_EVENT, 1, bytes(16), 0, 2), timestamp=1)


def txn(i: int, gtids: int = 1) -> bytes:
    events = raw(i)
    return b"".join([PLACEHOLDER] * gtids + events[:1] + events[1:])


def gnos(directory: Path) -> list[tuple[str, GtidSet, list[int]]]:
    """Per file: its PREVIOUS_GTIDS and the gnos of its GTID events, checked as events."""
    out = []
    for path in sorted(directory.glob("binlog.0*")):
        data = path.read_bytes()
        _, before = previous_gtids(data)
        found = []
        for ev in iter_events(data):
            if ev.type_code == EventType.GTID:
                g = MysqlGtidEvent.parse(ev.data[19:-4], None, 33)
                assert g.sid == SID and (g.last_committed, g.sequence_number) == (g.gno - 1, g.gno)
                found.append(g.gno)
        out.append((path.name, before, found))
    return out


def assert_gapless(directory: Path, last: int) -> None:
    seen = 0
    for _, before, found in gnos(directory):
        assert before == GtidSet.upto(SID, seen)
        assert found == list(range(seen + 1, seen + 1 + len(found)))
        seen += len(found)
    assert seen == last


def test_gnos_are_gapless_across_batches_files_and_restarts(tmp_path: Path):
    w = BinlogWriter(tmp_path, max_file_size=1500, gtids=MysqlGtids(SID))
    n = 0
    for batch in ([0], [1, 2, 3], list(range(4, 15))):
        buf, ends = bytearray(), []
        for i in batch:
            buf += txn(i)
            ends.append(len(buf))
        w.append_batch(buf, ends, find(buf, 0, len(buf)))
        n += len(batch)
    assert w.gno == n
    w.close()
    w = BinlogWriter(tmp_path, max_file_size=1500, gtids=MysqlGtids(SID))  # clean close: a new file
    assert w.gno == n
    w.append_encoded(bytearray(txn(20)))
    os.close(w._fd)  # a crash: no STOP, the file stays the newest
    w = BinlogWriter(tmp_path, max_file_size=1500, gtids=MysqlGtids(SID))
    assert w.gno == n + 1
    w.append_batch(bytearray(txn(21)), [len(txn(21))])  # offsets found by walking
    w.close()
    assert len(list(tmp_path.glob("binlog.0*"))) > 3
    assert_gapless(tmp_path, n + 2)
    for f in tmp_path.glob("binlog.0*"):
        assert readable(f)


def test_a_torn_transaction_gives_its_gno_back(tmp_path: Path):
    w = BinlogWriter(tmp_path, gtids=MysqlGtids(SID))
    for i in range(3):
        w.append_encoded(bytearray(txn(i)))
    path = w.path
    os.close(w._fd)
    size = path.stat().st_size
    os.truncate(path, size - 7)  # the last transaction torn
    w = BinlogWriter(tmp_path, gtids=MysqlGtids(SID))
    assert w.gno == 2
    w.append_encoded(bytearray(txn(3)))
    w.close()
    assert_gapless(tmp_path, 3)


def test_an_aborted_stream_gives_its_gno_back(tmp_path: Path):
    w = BinlogWriter(tmp_path, gtids=MysqlGtids(SID))
    w.append_encoded(bytearray(txn(0)))
    w.begin_stream(100)
    w.write_part([PLACEHOLDER, *raw(1)[:1]])
    assert w.gno == 2
    w.abort_stream()
    assert w.gno == 1
    w.begin_stream(100)
    w.write_part([PLACEHOLDER, *raw(2)[:2]])
    w.write_part(raw(2)[2:])
    w.end_stream()
    w.close()
    assert_gapless(tmp_path, 2)


def test_a_ddl_may_hold_two_gtids(tmp_path: Path):
    w = BinlogWriter(tmp_path, gtids=MysqlGtids(SID))
    w.append_encoded(bytearray(txn(0, gtids=2)))
    w.append_encoded(bytearray(txn(1)))
    w.close()
    assert_gapless(tmp_path, 3)


def test_a_transaction_without_its_gtid_is_refused(tmp_path: Path):
    w = BinlogWriter(tmp_path, gtids=MysqlGtids(SID))
    with pytest.raises(ValueError, match="GTID"):
        w.append_encoded(bytearray(b"".join(raw(0))))
    buf = bytearray(txn(0) + b"".join(raw(1)))
    with pytest.raises(ValueError, match="2 transaction"):
        w.append_batch(buf, [len(txn(0)), len(buf)], [0])
    unterminated = bytearray(PLACEHOLDER + b"".join(raw(1)[:-1]))  # no CTS mark
    with pytest.raises(ValueError, match="terminator"):
        w.append_encoded(unterminated)
    assert w.gno == 0  # a refused transaction takes no number
    w.append_encoded(bytearray(txn(2)))
    w.close()
    assert_gapless(tmp_path, 1)


def test_files_of_another_cluster_are_refused(tmp_path: Path):
    w = BinlogWriter(tmp_path, gtids=MysqlGtids(SID), max_file_size=300)
    w.append_encoded(bytearray(txn(0)))
    w.append_encoded(bytearray(txn(1)))  # rotates: the new file's PREVIOUS_GTIDS names SID
    os.close(w._fd)
    other = sid_of("00000000-0000-4000-8000-000000000001")
    with pytest.raises(CodecError, match="another cluster"):
        BinlogWriter(tmp_path, gtids=MysqlGtids(other), max_file_size=300)


def test_gtid_set_text_and_wire_forms():
    s = GtidSet.parse(
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7, 3e11fa47-71ca-11e1-9e33-c80aa9429562:6"
    )
    assert str(s) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7"
    assert GtidSet.decode(s.encode()) == s and s.prefix_end(SID) == 7
    assert (SID, 7) in s and (SID, 8) not in s
    assert GtidSet.parse("") == GtidSet() and not GtidSet()
    assert gtid_text(SID, 3) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:3"
    for bad in (
        "x:1",
        "3e11fa47-71ca-11e1-9e33-c80aa9429562",
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:0",
    ):
        with pytest.raises(CodecError):
            GtidSet.parse(bad)
    assert GTID_EVENT_SIZE == len(PLACEHOLDER)


def test_gtid_set_missing():
    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    for held, last, missing in [
        ("", 5, f"{u}:1-5"),
        (f"{u}:1-3", 5, f"{u}:4-5"),
        (f"{u}:1-3:5", 5, f"{u}:4"),
        (f"{u}:2-3:7-9", 10, f"{u}:1:4-6:10"),
        (f"{u}:1-10", 5, ""),
        (f"{u}:4-6", 3, f"{u}:1-3"),
        (f"{u}:4-6", 0, ""),
    ]:
        assert str(GtidSet.parse(held).missing(SID, last)) == missing, (held, last)
