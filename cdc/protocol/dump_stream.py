"""The dump stream's hot loop, over raw bytes: COM_BINLOG_DUMP packets straight into event
bytes, no object per event but the event's own bytes (`DumpClient._read` calls it).

Plain Python that Cython compiles unchanged when it is there (cdc/compiled.py lists this module;
`dump_stream.COMPILED` says which one runs). Everything unusual (ERR/EOF packets, rotations,
heartbeats, multi-chunk packets, damage) stops the fast loop and is handled by the caller in
ordinary Python, which also words the error messages.
"""

from __future__ import annotations

from cdc.binlog import constants, header, zcrc
from cdc.compiled import is_compiled
from cdc.protocol.packets import MAX_CHUNK

# A dump packet: 3-byte length, sequence id, the OK byte 0, then the event.
EVENT_AT = 5


def split_events(data: bytes, pos, verify) -> tuple[list[bytes], int]:  # C: dump_stream.pxd
    """Events of the complete dump packets in `data` from `pos`, and the offset it stopped at:
    the end of the data, a partial packet, or the first packet that is not a plain event of
    the file being read (ERR/EOF, ROTATE, heartbeat, an event without log_pos, a packet of
    16 MB or more, a short or damaged one: the caller looks at it closely)."""
    out: list[bytes] = []
    append = out.append
    end = len(data)
    residue, max_chunk, event_at = constants.CRC32_RESIDUE, MAX_CHUNK, EVENT_AT
    rotate, heartbeat = constants.EventType.ROTATE, constants.EventType.HEARTBEAT
    min_packet = event_at + constants.HEADER_LEN
    # Compiled, `p` is the bytes' buffer (dump_stream.pxd) and the header fields are read from
    # it in C, no tuple nor int object per event; as Python it is the bytes and the same code
    # indexes it.
    p = data
    while end - pos >= min_packet:
        length = p[pos] | p[pos + 1] << 8 | p[pos + 2] << 16
        stop = pos + 4 + length
        if p[pos + 4] != 0 or length <= constants.HEADER_LEN or length >= max_chunk or stop > end:
            break
        at = pos + event_at
        code = p[at + header.OFF_TYPE]
        if (
            header.event_size(p, at) != length - 1
            or header.log_pos(p, at) == 0
            or code == rotate
            or code == heartbeat
        ):
            break
        event = p[at:stop]  # compiled: bytes straight from the buffer, no slice object
        if verify and zcrc.crc(event) != residue:  # compiled: zlib's C function (zcrc.pxd)
            break
        append(event)
        pos = stop
    return out, pos


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
