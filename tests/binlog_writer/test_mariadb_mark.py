"""The mariadb flavour's CTS mark, a BINLOG_CHECKPOINT event (the mysql flavour's is a
ROWS_QUERY): one reader of both carriers (`cts_mark_text`), the writer's terminator check per
flavour, crash recovery at every byte of the last transaction, the recovery point, and
mariadb-binlog reading the marks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from binlog_writer.recovery_point import RecoveryPoint, mark_ending_at, scan_file
from cdc.binlog.events import (
    CHECKPOINT_MARK,
    ROWS_QUERY_MARK,
    BinlogCheckpointEvent,
    QueryEvent,
    RowsQueryEvent,
    XidEvent,
    cts_mark,
    cts_mark_text,
    encode_event,
)
from cdc.binlog.reader import read_file
from tests.binlog_writer.test_mariadb_gtids import PLACEHOLDER, SERVER, assert_gapless, txn, writer
from tests.binlog_writer.test_mariadb_tools import mariadb_binlog
from tests.binlog_writer.test_recovery import crash, readable
from tests.binlog_writer.test_stream import raw


def test_one_reader_for_both_carriers():
    for carrier, code in ((ROWS_QUERY_MARK, 29), (CHECKPOINT_MARK, 161)):
        event = encode_event(cts_mark(42, b"L1.7", carrier), flags=carrier.flags)
        assert event[4] == code and cts_mark_text(event) == b"CTS::42::L1.7"
        assert cts_mark_text(memoryview(event)) == b"CTS::42::L1.7"
    assert encode_event(cts_mark(1, carrier=ROWS_QUERY_MARK))[17] == 0x80  # IGNORABLE
    # The same types without the mark's text, and other events, are not marks.
    for body in (RowsQueryEvent(b"SELECT 1"), BinlogCheckpointEvent(b"binlog.000001")):
        assert cts_mark_text(encode_event(body)) is None
    assert cts_mark_text(encode_event(XidEvent(3))) is None
    assert cts_mark_text(encode_event(QueryEvent(b"CTS::5"))) is None


def test_each_flavour_writer_takes_only_its_own_carrier(tmp_path: Path):
    rows_query_end = PLACEHOLDER + b"".join(raw(1)[1:])  # a ROWS_QUERY mark
    w = writer(tmp_path / "mariadb")
    assert w.mark is CHECKPOINT_MARK
    with pytest.raises(ValueError, match="type 161"):
        w.append_encoded(bytearray(rows_query_end))
    with pytest.raises(ValueError, match="type 161"):
        w.append_batch(bytearray(rows_query_end), [len(rows_query_end)])
    w.append_encoded(bytearray(txn(1)))
    w.close()
    mysql = BinlogWriter(tmp_path / "mysql")
    assert mysql.mark is ROWS_QUERY_MARK
    checkpoint_end = b"".join(raw(1)[:-1]) + encode_event(cts_mark(1, carrier=CHECKPOINT_MARK))
    with pytest.raises(ValueError, match="type 29"):
        mysql.append_encoded(bytearray(checkpoint_end))
    mysql.close()


def test_cut_at_every_byte_of_the_last_transaction(tmp_path: Path):
    """A mariadb-flavoured file cut anywhere in its last transaction reopens at the previous
    mark: the BINLOG_CHECKPOINT ends a transaction as the ROWS_QUERY mark does, the torn
    GTID's seq_no is given back, and appending continues a file mariadb-binlog reads."""
    src = tmp_path / "src"
    w = writer(src, fsync=FsyncPolicy.never())
    positions = [w.append_encoded(bytearray(txn(i))) for i in range(3)]
    crash(w)
    full = (src / "binlog.000001").read_bytes()
    last = positions[-1]
    assert last.end == len(full)
    for cut in range(last.start, last.end + 1):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        shutil.copy(src / "binlog.index", d)
        (d / "binlog.000001").write_bytes(full[:cut])
        w = writer(d, fsync=FsyncPolicy.never())
        whole = cut == last.end
        want = last.end if whole else last.start
        rep = w.recovery
        assert rep.scan is not None and rep.scan.valid_end == want, cut
        assert rep.scan.last_cts == (1002 if whole else 1001), cut
        assert rep.scan.last_mark == (b"CTS::1002" if whole else b"CTS::1001"), cut
        assert w.gno == (3 if whole else 2), cut
        w.append_encoded(bytearray(txn(9)))
        w.close()
        _, reader = read_file(d / "binlog.000001")
        assert list(reader)[-1].type_code == 3  # CRCs and log_pos verify; STOP last
        assert_gapless(d, 4 if whole else 3)
        if cut % 17 == 0 or cut in (last.start, last.start + 1, last.end - 1):
            assert readable(d / "binlog.000001"), cut
        shutil.rmtree(d)


def test_the_recovery_point_is_a_checkpoint_mark(tmp_path: Path):
    """The point saved after each fsync names the end of a BINLOG_CHECKPOINT mark; reopening
    scans only after it, and a point that is no mark's end is not trusted."""
    w = writer(tmp_path, fsync=FsyncPolicy.per_txn())
    positions = [w.append_encoded(bytearray(txn(i))) for i in range(4)]
    crash(w)
    path = tmp_path / "binlog.000001"
    point = RecoveryPoint(tmp_path, "binlog")
    assert point.load(path.name) == positions[-1].end
    data = path.read_bytes()
    for i, p in enumerate(positions):
        assert mark_ending_at(data, p.end, 4) == b"CTS::%d" % (1000 + i)
        assert mark_ending_at(data, p.end - 1, 4) is None
        assert mark_ending_at(data, p.start + len(PLACEHOLDER), 4) is None  # after a GTID
    anchored = scan_file(path, positions[1].end)
    assert anchored.transactions == 2 and anchored.last_mark == b"CTS::1003"
    # A torn tail after the point: the writer reopens at the point's mark.
    with open(path, "ab") as f:
        f.write(txn(4)[:-7])
    w = writer(tmp_path, fsync=FsyncPolicy.per_txn())
    assert w.position == positions[-1].end and w.gno == 4
    assert w.recovery.scan.last_mark == b"CTS::1003"
    w.close()
    assert readable(path)


def test_mariadb_binlog_prints_the_marks(tmp_path: Path):
    w = writer(tmp_path)
    for i in range(2):
        w.append_encoded(bytearray(txn(i)))
    w.close()
    out = mariadb_binlog(w.path, decode=False)
    assert "Binlog checkpoint CTS::1000\n" in out and "Binlog checkpoint CTS::1001\n" in out
    assert f"server id {SERVER}" in out
