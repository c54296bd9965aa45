"""CRC32 event checksums (zlib/IEEE). The FDE's CRC is computed with the in-use flag cleared,
so that closing a file can clear the flag in place without rewriting the CRC."""

from __future__ import annotations

import struct
import zlib

from .constants import CHECKSUM_LEN, FORMAT_DESCRIPTION_EVENT, HEADER_LEN, EventFlag
from .errors import CodecError
from .header import OFF_FLAGS, OFF_TYPE

_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_IN_USE = int(EventFlag.BINLOG_IN_USE)

Buffer = bytes | bytearray | memoryview


def event_crc(event: Buffer) -> int:
    """CRC32 of a whole event (header + body, without the trailing 4 CRC bytes)."""
    mv = memoryview(event)
    end = len(mv) - CHECKSUM_LEN
    if mv[OFF_TYPE] == FORMAT_DESCRIPTION_EVENT:
        flags = _U16.unpack_from(mv, OFF_FLAGS)[0]
        if flags & _IN_USE:
            # As if the in-use flag were cleared (the file's final state).
            crc = zlib.crc32(mv[:OFF_FLAGS])
            crc = zlib.crc32(_U16.pack(flags & ~_IN_USE), crc)
            return zlib.crc32(mv[OFF_FLAGS + 2 : end], crc)
    return zlib.crc32(mv[:end])


def stored_crc(event: Buffer) -> int:
    return _U32.unpack_from(event, len(event) - CHECKSUM_LEN)[0]


def verify(event: Buffer) -> None:
    """Raise CodecError if the stored CRC does not match."""
    if len(event) < HEADER_LEN + CHECKSUM_LEN:
        raise CodecError(f"event of {len(event)} bytes is too short to carry a checksum")
    want = stored_crc(event)
    got = event_crc(event)
    if want != got:
        raise CodecError(
            f"checksum mismatch for event type {event[OFF_TYPE]}: stored {want:#010x}, "
            f"computed {got:#010x} (corrupt or not a CRC32 binlog)"
        )


def seal(event: bytearray | memoryview) -> None:
    """Write the CRC of `event` (whose last 4 bytes are the CRC slot) in place."""
    _U32.pack_into(event, len(event) - CHECKSUM_LEN, event_crc(event))
