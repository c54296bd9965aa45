"""The 19-byte v4 event header as a dataclass, with pack/unpack."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .constants import HEADER_LEN
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
