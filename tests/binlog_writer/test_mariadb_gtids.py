"""The mariadb flavour's GTIDs, numbered by the writer like MySQL's: gapless seq_nos across
batches, files, restarts, crashes and aborted streams; each file starts with MariaDB 10.11's
FDE and a GTID_LIST holding the binlog state before it; mariadb-binlog reads every file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, MariadbGtids
from binlog_writer.gtids import find
from cdc.binlog.constants import MARIADB_GTID_EVENT, EventType
from cdc.binlog.errors import CodecError
from cdc.binlog.events import (
    CHECKPOINT_MARK,
    DomainGtid,
    GtidListEvent,
    MariadbGtidEvent,
    cts_mark,
    encode_event,
)
from cdc.binlog.fde import FormatDescription
from cdc.binlog.mariadb_gtid import FLAGS2_TRANSACTION, parse_position, position_text
from cdc.binlog.reader import iter_events
from tests.binlog_writer.test_mariadb_tools import mariadb_binlog
from tests.binlog_writer.test_recovery import readable
from tests.binlog_writer.test_stream import raw

DOMAIN, SERVER = 7, 100
PLACEHOLDER = encode_event(
    MariadbGtidEvent(0, 0, FLAGS2_TRANSACTION, trailer=bytes(6)), timestamp=1, server_id=SERVER
)
_162 = MARIADB_GTID_EVENT


def layout(server_id: int = SERVER) -> MariadbGtids:
    return MariadbGtids(DOMAIN, server_id)


def writer(directory: Path, server_id: int = SERVER, **kw) -> BinlogWriter:
    return BinlogWriter(
        directory,
        server_id=server_id,
        server_version="10.11.19-MariaDB-cdc-log",
        gtids=layout(server_id),
        **kw,
    )


def txn(i: int) -> bytes:
    """The GTID event replaces BEGIN; the CTS mark is a BINLOG_CHECKPOINT event."""
    mark = encode_event(cts_mark(1000 + i, carrier=CHECKPOINT_MARK), timestamp=1, server_id=SERVER)
    return PLACEHOLDER + b"".join(raw(i)[1:-1]) + mark


def files(directory: Path) -> list[tuple[str, tuple[DomainGtid, ...], list[DomainGtid]]]:
    """Per file: its GTID_LIST and its GTIDs, read as events."""
    out = []
    for path in sorted(directory.glob("binlog.0*")):
        events = list(iter_events(path.read_bytes()))
        fde = FormatDescription.parse(events[0].data[19:])
        assert fde.server_version == "10.11.19-MariaDB-cdc-log" and fde.post_header_len(162) == 19
        assert events[1].type_code == EventType.GTID_LIST
        listed = GtidListEvent.parse(events[1].data[19:-4], None).gtids
        found = []
        for ev in events[2:]:
            if ev.type_code == _162:
                g = MariadbGtidEvent.parse(ev.data[19:-4], None)
                found.append(DomainGtid(g.domain_id, ev.header.server_id, g.seq_no))
        out.append((path.name, listed, found))
    return out


def assert_gapless(directory: Path, last: int) -> None:
    seen = 0
    for _, listed, found in files(directory):
        assert (listed[-1].seq_no if listed else 0) == seen
        assert [g.seq_no for g in found] == list(range(seen + 1, seen + 1 + len(found)))
        assert {g.domain_id for g in found} <= {DOMAIN}
        seen += len(found)
    assert seen == last


def test_seq_nos_are_gapless_across_batches_files_and_restarts(tmp_path: Path):
    w = writer(tmp_path, max_file_size=1500)
    n = 0
    for batch in ([0], [1, 2, 3], list(range(4, 15))):
        buf, ends = bytearray(), []
        for i in batch:
            buf += txn(i)
            ends.append(len(buf))
        w.append_batch(buf, ends, find(buf, 0, len(buf), _162))
        n += len(batch)
    assert w.gno == n
    w.close()
    w = writer(tmp_path, max_file_size=1500)  # clean close: a new file
    assert w.gno == n
    w.append_encoded(bytearray(txn(20)))
    os.close(w._fd)  # a crash: no STOP, the file stays the newest
    w = writer(tmp_path, max_file_size=1500)
    assert w.gno == n + 1
    w.append_batch(bytearray(txn(21)), [len(txn(21))])  # offsets found by walking
    # A torn tail gives its seq_no back.
    w.append_encoded(bytearray(txn(22)))
    path, end = w.path, w.position
    os.close(w._fd)
    os.truncate(path, end - 5)
    w = writer(tmp_path, max_file_size=1500)
    assert w.gno == n + 2
    # An aborted stream too.
    w.begin_stream(10)
    w.write_part([txn(23)[: len(PLACEHOLDER)]])
    w.abort_stream()
    assert w.gno == n + 2
    w.close()
    assert len(list(tmp_path.glob("binlog.0*"))) > 3
    assert_gapless(tmp_path, n + 2)
    assert layout().last(w.path, w.path.stat().st_size) == n + 2
    for f in tmp_path.glob("binlog.0*"):
        assert readable(f)


def test_mariadb_binlog_prints_the_gtids(tmp_path: Path):
    w = writer(tmp_path)
    for i in range(2):
        w.append_encoded(bytearray(txn(i)))
    w.rotate()
    w.append_encoded(bytearray(txn(2)))
    w.close()
    out = mariadb_binlog(w.path, decode=False)
    assert "Gtid list [7-100-2]" in out
    assert "GTID 7-100-3 trans" in out


def test_a_new_server_id_starts_a_new_file_and_joins_the_gtid_list(tmp_path: Path):
    w = writer(tmp_path)
    w.append_encoded(bytearray(txn(0)))
    os.close(w._fd)  # a crash, then the dumper comes back with another server_id
    w = writer(tmp_path, server_id=200)
    assert w.gno == 1 and w.file == "binlog.000002"
    w.append_encoded(bytearray(txn(1).replace(PLACEHOLDER, _with_server_id(200))))
    w.rotate()
    w.close()
    listed = [f[1] for f in files(tmp_path)]
    assert listed[1] == (DomainGtid(DOMAIN, SERVER, 1),)
    assert listed[2] == (DomainGtid(DOMAIN, SERVER, 1), DomainGtid(DOMAIN, 200, 2))
    assert layout(200).last_gtid(tmp_path / "binlog.000002", 10**6) == DomainGtid(DOMAIN, 200, 2)


def _with_server_id(server_id: int) -> bytes:
    return encode_event(
        MariadbGtidEvent(0, 0, FLAGS2_TRANSACTION, trailer=bytes(6)),
        timestamp=1,
        server_id=server_id,
    )


def test_files_of_another_domain_are_refused(tmp_path: Path):
    w = writer(tmp_path, max_file_size=300)
    for i in range(3):
        w.append_encoded(bytearray(txn(i)))
    os.close(w._fd)
    with pytest.raises(CodecError, match="gtid_domain_id is 8"):
        BinlogWriter(
            tmp_path,
            server_id=SERVER,
            server_version="10.11.19-MariaDB-cdc-log",
            gtids=MariadbGtids(8, SERVER),
            max_file_size=300,
        )


def test_positions_parse_and_print():
    assert position_text(parse_position(" 0-1-5,7-100-12 ")) == "0-1-5,7-100-12"
    assert parse_position("") == ()
    for bad in ("0-1", "a-1-2", "0-1-2,0-2-3", "0-1-99999999999999999999999"):
        with pytest.raises(CodecError):
            parse_position(bad)
