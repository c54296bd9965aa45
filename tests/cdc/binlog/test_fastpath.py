"""FAST path on recorded MariaDB events: v1 -> v2 rows by byte surgery, table_id/server_id/
timestamp/log_pos/flags rewrite, CRC resealed, row images untouched."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from cdc.binlog import checksum
from cdc.binlog.errors import CodecError
from cdc.binlog.events import RowsEvent, TableMapEvent, decode_event
from cdc.binlog.fastpath import rewrite, rows_v1_to_v2, stamp_positions, table_id_of
from cdc.binlog.fde import mysql57_fde
from cdc.binlog.reader import read_file

FIXTURE = Path(__file__).parent / "fixtures" / "mariadb-10.11-binlog.000001"
OUT_FDE = mysql57_fde()


def recorded():
    data, reader = read_file(FIXTURE)
    events = list(reader)
    return reader.fde, events


def test_v1_rows_become_v2_with_same_rows():
    fde, events = recorded()
    maps = {}
    converted = 0
    for raw in events:
        ev = decode_event(raw.data, fde)
        if isinstance(ev.body, TableMapEvent):
            maps[ev.body.table_id] = ev.body
        if raw.type_code in (23, 24, 25):
            v2 = rows_v1_to_v2(raw.data)
            checksum.verify(v2)
            assert v2[4] == raw.type_code + 7 and len(v2) == len(raw.data) + 2
            new = decode_event(v2, OUT_FDE).body
            old = ev.body
            assert isinstance(new, RowsEvent) and new.extra_data == b""
            assert (new.table_id, new.flags, new.rows_data) == (
                old.table_id,
                old.flags,
                old.rows_data,
            )
            cols = maps[old.table_id].columns(mariadb=True)
            assert new.decode_rows(cols) == old.decode_rows(cols)
            converted += 1
    assert converted >= 8


def test_rewrite_header_fields_and_table_id():
    fde, events = recorded()
    for raw in events:
        if raw.type_code not in (19, 23, 24, 25):
            continue
        out = rewrite(
            raw.data, table_id=0xABCDEF123456, server_id=99, timestamp=7, log_pos=1234, flags=0
        )
        checksum.verify(out)
        ev = decode_event(out, OUT_FDE)
        assert ev.header.server_id == 99 and ev.header.timestamp == 7 and ev.header.log_pos == 1234
        assert table_id_of(out) == 0xABCDEF123456 == ev.body.table_id
        if raw.type_code == 19:
            # Everything after the table id is untouched.
            assert bytes(out[25:-4]) == bytes(raw.data[25:-4])


def test_rewrite_rejects_bad_input():
    fde, events = recorded()
    xid = next(e for e in events if e.type_code == 16)
    with pytest.raises(CodecError):
        rewrite(xid.data, table_id=1)
    with pytest.raises(CodecError):
        rewrite(bytes(xid.data)[:-1])
    with pytest.raises(CodecError):
        rows_v1_to_v2(xid.data)


def test_input_without_crc():
    fde, events = recorded()
    rows = next(e for e in events if e.type_code == 23)
    no_crc = bytearray(rows.data[:-4])
    no_crc[9:13] = len(no_crc).to_bytes(4, "little")
    out = rewrite(no_crc, has_crc=False)
    checksum.verify(out)
    assert bytes(out[:4]) == bytes(rows.data[:4]) and len(out) == len(rows.data) + 2


def test_stamp_positions():
    fde, events = recorded()
    txn = bytearray(b"".join(bytes(rewrite(e.data, log_pos=0)) for e in events[5:12]))
    last = stamp_positions(txn, 1000)
    assert last + int.from_bytes(txn[last + 9 : last + 13], "little") == len(txn)
    off = 0
    while off < len(txn):
        size = int.from_bytes(txn[off + 9 : off + 13], "little")
        assert int.from_bytes(txn[off + 13 : off + 17], "little") == 1000 + off + size
        checksum.verify(txn[off : off + size])
        off += size
    with pytest.raises(CodecError):
        stamp_positions(txn + b"\x00" * 5, 0)


def test_stamped_crcs_are_zlibs_at_every_event_size():
    """The compiled stamping's CRC (zcrc.pxd: a table walk for short events, zlib's from 512
    bytes on) against zlib.crc32, for events of every size up to past that switch and a few
    large ones, at odd offsets in the buffer."""
    sizes = [*range(23, 1100), 4099, 70_001, 1 << 20]
    payload = bytes(range(256)) * (((1 << 20) >> 8) + 1)
    buf = bytearray()
    for n, size in enumerate(sizes):
        body = payload[n % 251 : n % 251 + size - 23]
        buf += struct.pack("<IBIIIH", n, 30, 1, size, 0, 0) + body + bytes(4)
    stamp_positions(buf, 4)
    off = 0
    for size in sizes:
        assert int.from_bytes(buf[off + size - 4 : off + size], "little") == zlib.crc32(
            buf[off : off + size - 4]
        ), size
        off += size
