"""The 19-byte v4 event header: its field offsets, readers of one field of a raw event (the
size, log_pos, timestamp: what per-event loops read without decoding), writers of the fields
that loops patch in place (and of the table id right after the header of TABLE_MAP and rows
events), and a dataclass with pack/unpack. Compiled modules use the offsets, readers and
writers of `header.pxd` (`from cdc.binlog cimport header`; `header.event_size(p, at)` reads a
buffer pointer in C), plain Python these."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .constants import HEADER_LEN, TABLE_ID_LEN, TABLE_ID_OFFSET
from .errors import CodecError

# timestamp, type, server_id, event_size, log_pos, flags
HEADER = struct.Struct("<IBIIIH")
assert HEADER.size == HEADER_LEN

# Offsets of the header fields, used by the fast path to patch in place.
OFF_TIMESTAMP = 0
OFF_TYPE = 4
OFF_SERVER_ID = 5
OFF_EVENT_SIZE = 9
OFF_LOG_POS = 13
OFF_FLAGS = 17

_U32 = struct.Struct("<I")


def event_size(data, at: int = 0) -> int:
    """The event_size field (u32) of the raw event starting at `at` of `data` (bytes-like)."""
    return _U32.unpack_from(data, at + OFF_EVENT_SIZE)[0]


def log_pos(data, at: int = 0) -> int:
    """The log_pos field (u32): where the next event starts in its file (0: not in a file)."""
    return _U32.unpack_from(data, at + OFF_LOG_POS)[0]


def server_id(data, at: int = 0) -> int:
    """The server_id field (u32): the server that wrote the event."""
    return _U32.unpack_from(data, at + OFF_SERVER_ID)[0]


def timestamp(data, at: int = 0) -> int:
    """The timestamp field (u32 seconds)."""
    return _U32.unpack_from(data, at + OFF_TIMESTAMP)[0]


def table_id(data, at: int = 0) -> int:
    """The 6-byte table id (LE) right after the header of the TABLE_MAP or rows event at `at`."""
    start = at + TABLE_ID_OFFSET
    return int.from_bytes(data[start : start + TABLE_ID_LEN], "little")


_HEAD = struct.Struct("<IBII")  # timestamp, type, server_id, event_size: offsets 0-12


def write_head(buf, at: int, timestamp: int, type_code: int, server_id: int, size: int) -> None:
    """Write the header fields up to event_size (offsets 0-12) of the event at `at` of `buf` (a
    writable buffer); log_pos and flags are left as they are."""
    _HEAD.pack_into(buf, at, timestamp, type_code, server_id, size)


def write_log_pos(buf, at: int, log_pos: int) -> None:
    """Write the log_pos field of the event at `at` of `buf`."""
    _U32.pack_into(buf, at + OFF_LOG_POS, log_pos)


def write_table_id(buf, at: int, table_id: bytes) -> None:
    """Write the 6-byte table id (LE) of the TABLE_MAP or rows event at `at` of `buf`."""
    buf[at + TABLE_ID_OFFSET : at + TABLE_ID_OFFSET + TABLE_ID_LEN] = table_id


@dataclass(slots=True, frozen=True)
class EventHeader:
    timestamp: int
    type_code: int
    server_id: int
    event_size: int  # header + body + checksum
    log_pos: int  # end offset of this event in its file (0 for artificial events)
    flags: int

    def pack(self) -> bytes:
        return HEADER.pack(
            self.timestamp,
            self.type_code,
            self.server_id,
            self.event_size,
            self.log_pos,
            self.flags,
        )

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> None:
        HEADER.pack_into(
            buf,
            offset,
            self.timestamp,
            self.type_code,
            self.server_id,
            self.event_size,
            self.log_pos,
            self.flags,
        )

    @classmethod
    def unpack(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> EventHeader:
        if len(buf) - offset < HEADER_LEN:
            raise CodecError(f"truncated event header: {len(buf) - offset} of {HEADER_LEN} bytes")
        return cls(*HEADER.unpack_from(buf, offset))
