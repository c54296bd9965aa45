"""BinlogCopier (an HA follower's copy): fed the events a dump of the writer's files would
send, it produces the same files byte for byte, only ever holds whole transactions, and
resumes after a restart; truncate_copy cuts a copy back to a term's start."""

from __future__ import annotations

from pathlib import Path

from binlog_writer import layout
from binlog_writer.copier import BinlogCopier, truncate_copy
from binlog_writer.writer import BinlogWriter
from cdc.binlog.events import XidEvent, cts_mark
from cdc.binlog.query import QueryEvent
from cdc.binlog.reader import EventReader


def write_source(directory: Path, txns: int, *, close: bool = False) -> BinlogWriter:
    writer = BinlogWriter(directory, max_file_size=4096, server_id=7)
    for i in range(txns):
        writer.append_transaction(
            [QueryEvent(b"BEGIN", db=b"db"), XidEvent(i + 1), cts_mark(1000 + i)]
        )
    writer.flush()
    if close:
        writer.close()
    return writer


def dump_stream(directory: Path, start: tuple[str, int] = ("", 4)):
    """(file, pos, event bytes) as COM_BINLOG_DUMP hands them out: each file's FDE with the
    in-use flag cleared (log_pos 0 when starting mid-file), then the events from `pos`."""
    names = layout.read_index(directory, "binlog")
    file, pos = start
    first = names.index(file) if file else 0
    for name in names[first:]:
        data = (directory / name).read_bytes()
        for ev in EventReader(data, allow_partial_tail=True):
            raw = bytearray(ev.data)
            if ev.pos == 4:
                raw[21 - 4] &= ~1
                if pos > 4:
                    raw[13:17] = b"\0\0\0\0"
                    yield name, 4, bytes(raw)
                    continue
            if ev.pos >= pos or ev.pos == 4:
                yield name, ev.pos, bytes(raw)
        pos = 4


def same_files(a: Path, b: Path) -> bool:
    names = layout.read_index(a, "binlog")
    return names == layout.read_index(b, "binlog") and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names
    )


def test_copy_is_byte_identical_across_rotations_and_restarts(tmp_path):
    src, dst = tmp_path / "leader", tmp_path / "follower"
    writer = write_source(src, 60)
    assert len(writer.files()) > 2
    events = list(dump_stream(src))
    copier = BinlogCopier(dst)
    for file, pos, data in events[: len(events) // 2]:
        copier.add(file, pos, data)
    copier.close()  # a follower restart half-way
    copier = BinlogCopier(dst)
    for file, pos, data in dump_stream(src, copier.resume_point()):
        copier.add(file, pos, data)
    copier.close()
    assert same_files(src, dst)  # the active file too, in-use flag set in both
    writer.close()  # STOP + in-use cleared on the leader: the copy follows
    copier = BinlogCopier(dst)
    file, pos = copier.resume_point()
    for f, p, data in dump_stream(src, (file, pos)):
        copier.add(f, p, data)
    copier.close()
    assert same_files(src, dst)


def test_partial_transaction_never_reaches_the_copy(tmp_path):
    src, dst = tmp_path / "leader", tmp_path / "follower"
    write_source(src, 3)
    events = list(dump_stream(src))
    copier = BinlogCopier(dst)
    for file, pos, data in events[:-1]:  # the last CTS mark is missing
        copier.add(file, pos, data)
    copier.close()
    size = (dst / "binlog.000001").stat().st_size
    assert size == events[-3][1]  # ends after the second transaction's mark
    assert BinlogCopier(dst).resume_point() == ("binlog.000001", size)


def test_truncate_copy_cuts_back_to_a_term_start(tmp_path):
    src = tmp_path / "leader"
    write_source(src, 60).close()
    names = layout.read_index(src, "binlog")
    middle = names[1]
    data = (src / middle).read_bytes()
    boundary = [ev.end for ev in EventReader(data)][3]
    assert truncate_copy(src, "binlog", middle, boundary)
    assert layout.read_index(src, "binlog") == names[:2]
    assert (src / middle).stat().st_size == boundary
    assert not (src / names[2]).exists()
    assert (src / middle).read_bytes()[21] & 1  # active again
    assert not truncate_copy(src, "binlog", middle, boundary)
    # A term that began on a fresh file (pos 4): that file is fetched again from the start.
    assert truncate_copy(src, "binlog", middle, 4)
    assert layout.read_index(src, "binlog") == names[:1]
