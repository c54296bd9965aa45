"""The recovery point: opening a file after a crash scans only what follows the last durable
transaction boundary, and finds what a whole-file scan finds; a point that does not check out
(garbage, not a transaction end, cut away by a copy) falls back to the whole file."""

from __future__ import annotations

from pathlib import Path

from binlog_writer import BinlogWriter, FsyncPolicy, key_from_mark, last_written_key, scan
from binlog_writer.copier import truncate_copy
from binlog_writer.recovery_point import RecoveryPoint, path_of, scan_file
from tests.binlog_writer.test_recovery import crash, txn


def written(d: Path, n: int, torn: bytes = b"") -> list:
    w = BinlogWriter(d, fsync=FsyncPolicy.per_txn())
    positions = [w.append_transaction(txn(i)) for i in range(n)]
    crash(w)
    with open(d / "binlog.000001", "ab") as f:
        f.write(torn)
    return positions


def test_point_follows_fsyncs_and_recovery_reads_only_the_tail(tmp_path: Path):
    positions = written(tmp_path, 30, torn=b"\x01" * 37)
    assert RecoveryPoint(tmp_path, "binlog").load("binlog.000001") == positions[-1].end
    path = tmp_path / "binlog.000001"
    full = scan(path.read_bytes())
    fast = scan_file(path, positions[-1].end)
    assert fast.transactions == 0 and full.transactions == 30  # nothing after the point
    for field in ("valid_end", "last_cts", "last_mark", "last_txn_end", "header_end", "in_use"):
        assert getattr(fast, field) == getattr(full, field), field
    w = BinlogWriter(tmp_path)
    assert w.position == positions[-1].end and w.recovery.truncated_bytes == 37
    assert last_written_key(w) == key_from_mark(full.last_mark)
    w.append_transaction(txn(99))
    w.close()


def test_a_point_that_does_not_check_out_means_a_whole_scan(tmp_path: Path):
    positions = written(tmp_path, 5)
    path = tmp_path / "binlog.000001"
    for bogus in (positions[2].end - 3, positions[1].start + 20, 10**9):
        RecoveryPoint(tmp_path, "binlog").save("binlog.000001", bogus)
        assert scan_file(path, bogus).transactions == 5  # scanned from the start
    path_of(tmp_path, "binlog").write_bytes(b"garbage")
    assert RecoveryPoint(tmp_path, "binlog").load("binlog.000001") is None
    assert BinlogWriter(tmp_path).position == positions[-1].end


def test_cutting_a_copy_below_its_point_forgets_it(tmp_path: Path):
    positions = written(tmp_path, 5)
    truncate_copy(tmp_path, "binlog", "binlog.000001", positions[3].end)
    assert RecoveryPoint(tmp_path, "binlog").saved() is None
    w = BinlogWriter(tmp_path, fsync=FsyncPolicy.per_txn())
    assert w.position == positions[3].end
    w.append_transaction(txn(7))  # a new point past the cut
    assert RecoveryPoint(tmp_path, "binlog").load("binlog.000001") == w.position
    crash(w)
    truncate_copy(tmp_path, "binlog", "binlog.000001", w.position)  # nothing cut: kept
    assert RecoveryPoint(tmp_path, "binlog").load("binlog.000001") == w.position


def test_a_point_that_cannot_be_written_does_not_fail_the_append(tmp_path: Path):
    """(Its first write needs a block: on a full disk it fails after the transaction's bytes
    are in the file; an append that raised then would be written again on the retry.)"""
    path_of(tmp_path, "binlog").mkdir()  # any write of the point fails
    w = BinlogWriter(tmp_path, fsync=FsyncPolicy.per_txn())
    positions = [w.append_transaction(txn(i)) for i in range(3)]
    w.close()
    assert RecoveryPoint(tmp_path, "binlog").saved() is None
    w = BinlogWriter(tmp_path)  # a whole scan of binlog.000001 (a clean STOP: a new file)
    assert (w.file, positions[-1].file) == ("binlog.000002", "binlog.000001")
