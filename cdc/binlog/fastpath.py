"""FAST path: rewrite raw events without decoding rows. Patches header fields (timestamp,
server_id, log_pos, flags), the 6-byte table_id of TABLE_MAP/rows events, converts MariaDB rows
v1 (23-25) to MySQL v2 (30-32) by inserting the 2-byte extra-data length, and reseals the CRC."""

from __future__ import annotations

import struct
import zlib

from cdc.binlog import constants, header, zcrc
from cdc.compiled import is_compiled

from .constants import (
    CHECKSUM_LEN,
    HEADER_LEN,
    ROWS_EXTRA_OFFSET,
    ROWS_TYPES,
    ROWS_V1_TO_V2,
    ROWS_V2_NO_EXTRA,
    TABLE_ID_LEN,
    TABLE_ID_OFFSET,
    EventType,
)
from .errors import CodecError
from .header import OFF_FLAGS, OFF_LOG_POS, OFF_SERVER_ID, OFF_TIMESTAMP, OFF_TYPE, event_size

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_TABLE_ID_TYPES = frozenset(ROWS_TYPES | {EventType.TABLE_MAP})

Buffer = bytes | bytearray | memoryview


def event_type(event: Buffer) -> int:
    return event[OFF_TYPE]


def table_id_of(event: Buffer) -> int:
    """table_id of a TABLE_MAP or rows event (6-byte ids, as MySQL >= 5.1.4 and MariaDB write)."""
    return int.from_bytes(event[TABLE_ID_OFFSET : TABLE_ID_OFFSET + TABLE_ID_LEN], "little")


def rewrite(
    event: Buffer,
    *,
    table_id: int | None = None,
    server_id: int | None = None,
    timestamp: int | None = None,
    log_pos: int | None = None,
    flags: int | None = None,
    has_crc: bool = True,
    v1_to_v2: bool = True,
) -> bytearray:
    """A rewritten copy of one raw event, always sealed with a CRC32 (output is CRC32).

    `has_crc` says whether the *input* ends with 4 CRC bytes (DN binlog_checksum=CRC32).
    With `v1_to_v2`, MariaDB rows v1 become MySQL v2 (consumers of 5.7-flavoured output expect
    v2). Nothing else of the body is touched: the row images stay raw bytes.
    """
    n = len(event)
    if n < HEADER_LEN + (CHECKSUM_LEN if has_crc else 0):
        raise CodecError(f"event of {n} bytes is shorter than its header")
    if event_size(event) != n:
        raise CodecError(f"event_size field {event_size(event)} != event length {n}")
    body_end = n - CHECKSUM_LEN if has_crc else n
    code = event[OFF_TYPE]
    if v1_to_v2 and code in ROWS_V1_TO_V2:
        split = ROWS_EXTRA_OFFSET  # after table_id (6) + flags (2)
        if body_end < split:
            raise CodecError(f"rows v1 event of {n} bytes is shorter than its post-header")
        out = bytearray(body_end + 2 + CHECKSUM_LEN)
        out[:split] = event[:split]
        out[split : split + 2] = ROWS_V2_NO_EXTRA
        out[split + 2 : body_end + 2] = event[split:body_end]
        out[OFF_TYPE] = ROWS_V1_TO_V2[code]
    else:
        out = bytearray(body_end + CHECKSUM_LEN)
        out[:body_end] = event[:body_end]
    _U32.pack_into(out, header.OFF_EVENT_SIZE, len(out))
    if table_id is not None:
        if code not in _TABLE_ID_TYPES:
            raise CodecError(f"event type {code} has no table_id")
        out[TABLE_ID_OFFSET : TABLE_ID_OFFSET + TABLE_ID_LEN] = table_id.to_bytes(
            TABLE_ID_LEN, "little"
        )
    if server_id is not None:
        _U32.pack_into(out, OFF_SERVER_ID, server_id)
    if timestamp is not None:
        _U32.pack_into(out, OFF_TIMESTAMP, timestamp)
    if log_pos is not None:
        _U32.pack_into(out, OFF_LOG_POS, log_pos)
    if flags is not None:
        _U16.pack_into(out, OFF_FLAGS, flags)
    _seal(out, 0, len(out))
    return out


def rows_v1_to_v2(event: Buffer, *, has_crc: bool = True) -> bytearray:
    """Byte surgery: WRITE/UPDATE/DELETE_ROWS v1 -> v2 (type +7, 2 bytes `02 00` after flags)."""
    if event[OFF_TYPE] not in ROWS_V1_TO_V2:
        raise CodecError(f"event type {event[OFF_TYPE]} is not a rows v1 event")
    return rewrite(event, has_crc=has_crc)


def reseal(event: bytearray | memoryview) -> None:
    """Recompute the CRC of one event in place."""
    _seal(event, 0, len(event))


def _seal(buf: bytearray | memoryview, start: int, end: int) -> None:
    mv = memoryview(buf)
    if mv[start + OFF_TYPE] == EventType.FORMAT_DESCRIPTION and mv[start + OFF_FLAGS] & 1:
        # FDE CRC is defined with the in-use flag cleared.
        tmp = bytearray(mv[start : end - CHECKSUM_LEN])
        tmp[OFF_FLAGS] &= 0xFE
        crc = zlib.crc32(tmp)
    else:
        crc = zlib.crc32(mv[start : end - CHECKSUM_LEN])
    _U32.pack_into(buf, end - CHECKSUM_LEN, crc)


def stamp_positions(buf: bytearray, base, start=0, end=-1) -> int:  # C types: fastpath.pxd
    """Set log_pos of every event in `buf[start:end]` (concatenated whole events that will be
    written at file offset `base`) to its end offset and reseal its CRC. Returns the offset of
    the last event inside `buf` (the transaction's terminator). `end` -1: the end of `buf`.

    This is the writer's hot loop: one header walk, the log_pos and one crc32 per event; in C
    when compiled (fastpath.pxd: the bytearray's own buffer, zlib's crc32 called directly).
    Transactions never contain an FDE, so the FDE's special CRC rule is not needed here.
    """
    n = len(buf) if end < 0 else end
    off = last = start
    if COMPILED:
        p = buf  # C: the bytearray's buffer (fastpath.pxd)
        while off < n:
            last = off
            if n - off < constants.HEADER_LEN:
                raise CodecError(
                    f"transaction buffer ends with {n - off} stray bytes at offset {off}"
                )
            size = header.event_size(p, off)
            stop = off + size
            if size < constants.HEADER_LEN + constants.CHECKSUM_LEN or stop > n:
                raise CodecError(f"event at transaction offset {off} has bad event_size {size}")
            header.write_log_pos(p, off, base + stop - start)
            crc = zcrc.crc32(0, p + off, size - constants.CHECKSUM_LEN)  # C: zcrc.pxd
            p[stop - 4] = crc & 0xFF
            p[stop - 3] = (crc >> 8) & 0xFF
            p[stop - 2] = (crc >> 16) & 0xFF
            p[stop - 1] = (crc >> 24) & 0xFF
            off = stop
        return last
    mv = memoryview(buf)
    pack = _U32.pack_into
    crc32 = zlib.crc32
    try:
        while off < n:
            last = off
            size = event_size(mv, off)
            stop = off + size
            if size < HEADER_LEN + CHECKSUM_LEN or stop > n:
                raise CodecError(f"event at transaction offset {off} has bad event_size {size}")
            pack(mv, off + OFF_LOG_POS, base + stop - start)
            pack(mv, stop - CHECKSUM_LEN, crc32(mv[off : stop - CHECKSUM_LEN]))
            off = stop
    except struct.error:
        raise CodecError(
            f"transaction buffer ends with {n - off} stray bytes at offset {off}"
        ) from None
    finally:
        mv.release()
    return last


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
