"""The per-event hot loops of a MergeSource, over raw bytes, no objects per event but the event's
own bytes: splitting the dump stream into events, and cutting events into binlog groups.

Plain Python that Cython compiles unchanged when it is there (`setup.py` COMPILED lists this
module; `import merge_source.scan; merge_source.scan.COMPILED` says which one runs). Everything
unusual (ERR/EOF packets, rotations, heartbeats, multi-chunk packets, damage) stops the fast
loop and is handled by the caller in ordinary Python, which also words the error messages.
"""

from __future__ import annotations

import struct
import zlib

CRC32_RESIDUE = 0x2144DF1C  # zlib.crc32(data + crc32(data) as 4 LE bytes), for any data
MAX_CHUNK = 0xFFFFFF
# packet header (u32: length | seq << 24), OK byte, then the event header from its type on
_PACKET_EVENT = struct.Struct("<IB4xB4xII")  # hdr, ok, type, event_size, log_pos
ROTATE = 4
HEARTBEAT = 27
FDE = 15
GTID = 162
XID = 16
XA_PREPARE = 38
QUERY = 2


def split_events(data: bytes, pos: int, verify: bool) -> tuple[list[bytes], int]:
    """Events of the complete dump packets in `data` from `pos`, and the offset it stopped at:
    the end of the data, a partial packet, or the first packet that is not a plain event of
    the file being read (ERR/EOF, ROTATE, heartbeat, an event without log_pos, a packet of
    16 MB or more, a short or damaged one: the caller looks at it closely)."""
    out: list[bytes] = []
    append = out.append
    end = len(data)
    unpack = _PACKET_EVENT.unpack_from
    crc32 = zlib.crc32
    while end - pos >= 24:
        hdr, ok, code, size, log_pos = unpack(data, pos)
        length = hdr & 0xFFFFFF
        stop = pos + 4 + length
        if (
            ok != 0
            or length < 20
            or length >= MAX_CHUNK
            or stop > end
            or size != length - 1
            or log_pos == 0
            or code == ROTATE
            or code == HEARTBEAT
        ):
            break
        event = data[pos + 5 : stop]
        if verify and crc32(event) != CRC32_RESIDUE:
            break
        append(event)
        pos = stop
    return out, pos


def group_end(data: bytes, standalone: bool) -> bool:
    """Whether a QUERY event inside a group is its terminator (a standalone group's only one;
    otherwise COMMIT, XA COMMIT, XA ROLLBACK)."""
    if standalone:
        return True
    db_len = data[27]
    status_len = data[30] | data[31] << 8
    start = 32 + status_len + db_len + 1
    text = data[start : min(start + 12, len(data) - 4)].upper()  # without the CRC
    return text.startswith((b"COMMIT", b"XA COMMIT", b"XA ROLLBACK"))


def _is_compiled() -> bool:
    return type(_is_compiled).__name__ != "function"  # a Cython function is another type


COMPILED = _is_compiled()
