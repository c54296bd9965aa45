"""Crash recovery: a file cut at every byte of its last transaction (or with a torn last
transaction) reopens to exactly the previous complete transaction; appending then works and
mariadb-binlog still reads the file."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, Boundary, FsyncPolicy, scan
from cdc.binlog.constants import ColumnType as T
from cdc.binlog.events import QueryEvent, RowsEvent, TableMapEvent, XidEvent, cts_mark
from cdc.binlog.reader import read_file
from cdc.binlog.table_map import Column

COLS = [Column(T.LONG, nullable=False, name=b"id"), Column(T.VARCHAR, 64, name=b"v", collation=45)]
TM = TableMapEvent.from_columns(7, "d", "t", COLS, primary_key=[0])


def txn(i: int) -> list[object]:
    return [
        QueryEvent(b"BEGIN", db=b"d"),
        TM,
        RowsEvent.from_rows(30, 7, COLS, [[i, b"v%d" % i]]),
        XidEvent(i),
        cts_mark(1000 + i),
    ]


def write_file(directory: Path, n: int) -> list:
    w = BinlogWriter(directory, fsync=FsyncPolicy.never())
    positions = [w.append_transaction(txn(i)) for i in range(n)]
    crash(w)
    return positions


def crash(w: BinlogWriter) -> None:
    """What a kill -9 leaves: buffered bytes reached the OS, no STOP, the in-use flag set."""
    w.flush()
    os.close(w._fd)  # noqa: SLF001
    w._fd = None  # noqa: SLF001


def readable(path: Path) -> bool:
    if not shutil.which("mariadb-binlog"):
        return True
    res = subprocess.run(
        ["mariadb-binlog", "--no-defaults", "--verify-binlog-checksum", str(path)],
        capture_output=True,
        timeout=30,
    )
    return res.returncode == 0 and b"ERROR" not in res.stderr


def test_cut_at_every_byte_of_the_last_transaction(tmp_path: Path):
    src = tmp_path / "src"
    positions = write_file(src, 3)
    full = (src / "binlog.000001").read_bytes()
    last = positions[-1]
    assert last.end == len(full)
    for cut in range(last.start, last.end + 1):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        shutil.copy(src / "binlog.index", d)
        (d / "binlog.000001").write_bytes(full[:cut])
        w = BinlogWriter(d, fsync=FsyncPolicy.never())
        want = last.end if cut == last.end else last.start
        rep = w.recovery
        assert rep.scan is not None and rep.scan.valid_end == want, cut
        assert rep.truncated_bytes == cut - want
        assert rep.scan.last_cts == (1002 if cut == last.end else 1001)
        assert w.position == want
        p = w.append_transaction(txn(9))
        w.close()
        data = (d / "binlog.000001").read_bytes()
        assert p.start == want
        _, reader = read_file(d / "binlog.000001")
        events = list(reader)  # CRCs and log_pos verify
        assert events[-1].type_code == 3  # STOP
        if cut % 17 == 0 or cut in (last.start, last.start + 1, last.end - 1):
            assert readable(d / "binlog.000001"), cut
        del data
        shutil.rmtree(d)


def test_torn_garbage_tail_is_dropped(tmp_path: Path):
    positions = write_file(tmp_path, 2)
    path = tmp_path / "binlog.000001"
    data = bytearray(path.read_bytes())
    data[positions[-1].start + 40] ^= 0xFF  # corrupt the last transaction (CRC failure)
    path.write_bytes(bytes(data))
    w = BinlogWriter(tmp_path, fsync=FsyncPolicy.never())
    assert w.position == positions[0].end
    assert "checksum" in w.recovery.scan.reason
    w.close()


def test_clean_close_starts_a_new_file(tmp_path: Path):
    with BinlogWriter(tmp_path) as w:
        w.append_transaction(txn(1))
    first = (tmp_path / "binlog.000001").read_bytes()
    assert first[21] & 1 == 0  # in-use flag cleared on close
    w2 = BinlogWriter(tmp_path)
    assert w2.file == "binlog.000002" and w2.recovery.started_new_file
    w2.append_transaction(txn(2))
    assert (tmp_path / "binlog.000002").read_bytes()[21] & 1 == 1  # open file: in use
    w2.close()
    assert w2.files() == ["binlog.000001", "binlog.000002"]
    assert readable(tmp_path / "binlog.000001") and readable(tmp_path / "binlog.000002")


def test_interrupted_rotation_and_torn_header(tmp_path: Path):
    with BinlogWriter(tmp_path, fsync=FsyncPolicy.never()) as w:
        w.append_transaction(txn(1))
        w.rotate()
    # Crash between ROTATE and indexing the next file: drop it from the index.
    (tmp_path / "binlog.index").write_text("./binlog.000001\n")
    (tmp_path / "binlog.000002").write_bytes(b"\xfebin\x00\x01")  # torn, unindexed
    w = BinlogWriter(tmp_path, fsync=FsyncPolicy.never())
    assert w.file == "binlog.000002" and w.position == 154
    w.append_transaction(txn(2))
    w.close()
    assert readable(tmp_path / "binlog.000002")
    # A newest file whose header is torn is rewritten.
    (tmp_path / "binlog.index").write_text("./binlog.000001\n./binlog.000002\n./binlog.000003\n")
    (tmp_path / "binlog.000003").write_bytes(b"\xfebin" + b"\x00" * 10)
    w = BinlogWriter(tmp_path, fsync=FsyncPolicy.never())
    assert w.file == "binlog.000003" and w.position == 154
    w.close()


def test_transaction_must_end_with_its_terminator(tmp_path: Path):
    with BinlogWriter(tmp_path, fsync=FsyncPolicy.never()) as w:
        with pytest.raises(ValueError, match="terminator"):
            w.append_transaction(txn(1)[:-1])
    with BinlogWriter(tmp_path, fsync=FsyncPolicy.never(), boundary=Boundary.COMMIT) as w:
        w.append_transaction(txn(1)[:-1])  # XID ends it under the COMMIT rule
        w.append_transaction([QueryEvent(b"CREATE TABLE x (a INT)", db=b"d")])


def test_size_rotation_never_splits_and_prestamped_append(tmp_path: Path):
    from cdc.binlog.events import encode_event
    from cdc.binlog.fastpath import stamp_positions

    with BinlogWriter(tmp_path, max_file_size=1000, fsync=FsyncPolicy.every(3)) as w:
        for i in range(20):
            raw = bytearray(b"".join(encode_event(e) for e in txn(i)))
            start = w.prepare(len(raw))
            stamp_positions(raw, start)
            p = w.append_stamped(raw)
            assert p.end - p.start == len(raw)
        files = w.files()
    assert len(files) > 3
    for name in files:
        res = scan((tmp_path / name).read_bytes())
        assert res.reason == "" and res.closed_by is not None
    assert sum(scan((tmp_path / n).read_bytes()).transactions for n in files) == 20
