"""Streamed (huge) transactions: written in parts, invisible to readers until whole, the same
bytes as a one-piece append, and cut away by an abort, a close or crash recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from cdc.binlog.constants import EventType
from cdc.binlog.events import encode_event
from cdc.binlog.reader import iter_events
from tests.binlog_writer.test_recovery import crash, readable, txn


def raw(i: int) -> list[bytes]:
    return [encode_event(e, timestamp=1, server_id=1) for e in txn(i)]


def without_times(path: Path) -> list[bytes]:
    """The file's events minus header timestamps and CRCs, and minus the format description's
    body (its creation time): two writers opened in different seconds differ only there."""
    return [
        bytes(ev.data[4:19] if ev.type_code == EventType.FORMAT_DESCRIPTION else ev.data[4:-4])
        for ev in iter_events(path.read_bytes())
    ]


@pytest.mark.parametrize("fsync", [FsyncPolicy.per_txn(), FsyncPolicy.never()])
def test_a_streamed_transaction_is_the_same_bytes_as_one_append(tmp_path: Path, fsync):
    whole = BinlogWriter(tmp_path / "whole", fsync=fsync)
    parts = BinlogWriter(tmp_path / "parts", fsync=fsync)
    for i in range(3):
        whole.append_transaction(raw(i))
        events = raw(i)
        start = parts.begin_stream(sum(map(len, events)))
        for e in events:
            parts.write_part([e])
            assert parts.visible_end(parts.file) == start  # readers stop before it
        assert parts.visible_end("binlog.000999") is None
        parts.end_stream()
        assert parts.visible_end(parts.file) is None
    whole.close(), parts.close()
    a, b = (tmp_path / name / "binlog.000001" for name in ("whole", "parts"))
    assert without_times(a) == without_times(b) and a.stat().st_size == b.stat().st_size
    assert readable(tmp_path / "parts" / "binlog.000001")


def test_abort_close_and_crash_leave_no_partial_transaction(tmp_path: Path):
    w = BinlogWriter(tmp_path, fsync=FsyncPolicy.never())
    w.append_transaction(raw(0))
    end = w.position
    w.begin_stream(100)
    w.write_part(raw(1)[:2])
    w.abort_stream()
    assert w.position == end and (tmp_path / w.file).stat().st_size == end
    with pytest.raises(ValueError, match="terminator"):  # no CTS mark at the end: refused
        w.begin_stream(100)
        w.write_part(raw(1)[:3])
        w.end_stream()
    assert w.position == end
    w.begin_stream(100)
    w.write_part(raw(2)[:3])
    with pytest.raises(RuntimeError):
        w.append_transaction(raw(3))
    with pytest.raises(RuntimeError):
        w.rotate()
    crash(w)
    again = BinlogWriter(tmp_path, fsync=FsyncPolicy.never())
    assert again.position == end  # recovery cut the torn streamed tail
    again.begin_stream(100)
    again.write_part(raw(4)[:3])
    again.close()  # a clean stop drops the open stream before its STOP event
    assert readable(tmp_path / "binlog.000001")
