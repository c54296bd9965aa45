"""The dump's hot loop on the serving side: the whole binlog events at the start of a batch
read from a file, framed as dump packets (3-byte length, sequence id, the OK byte 0, the event)
into one buffer, in one pass. Python spent about 1 µs per event here (a tuple to read the size,
a slice, a packed header and two list entries, then a join): most of a lone consumer's cost.

Plain Python that Cython compiles unchanged when it is there (cdc/compiled.py lists this module;
`framing.COMPILED` says which one runs). What is unusual (a partial event, a size below a
header, an event whose packet would need splitting at 16 MB) stops the loop; the caller looks
at it and words the error.
"""

from __future__ import annotations

import struct

from cdc.binlog import constants, header
from cdc.compiled import is_compiled
from cdc.protocol.packets import MAX_CHUNK

PACKET_HEAD = 5  # 3-byte length, sequence id, the OK byte 0
_HEAD = struct.Struct("<IB")  # length | seq << 24, then 0


def frame_whole_events(data: bytes, seq) -> tuple:  # C types: framing.pxd
    """(packets, bytes of events framed, events, the sequence id after them) for the whole
    events at the start of `data`, the first packet with sequence id `seq`."""
    end = len(data)
    largest = MAX_CHUNK - 2  # an event whose packet (0 + event) reaches MAX_CHUNK is split
    min_size = constants.HEADER_LEN
    p = data  # C: the bytes' buffer (framing.pxd)
    off = 0
    n = 0
    while end - off >= min_size:
        size = header.event_size(p, off)
        if size < min_size or size > largest or off + size > end:
            break
        off += size
        n += 1
    out = bytearray(off + PACKET_HEAD * n)
    pos = 0
    at = 0
    if COMPILED:
        q = out  # C: the bytearray's buffer, each byte written in C
        while pos < off:
            size = header.event_size(p, pos)
            length = size + 1
            q[at] = length & 0xFF
            q[at + 1] = (length >> 8) & 0xFF
            q[at + 2] = (length >> 16) & 0xFF
            q[at + 3] = seq
            q[at + 4] = 0
            at += PACKET_HEAD
            for k in range(size):
                q[at + k] = p[pos + k]
            at += size
            pos += size
            seq = (seq + 1) & 0xFF
        return out, off, n, seq
    pack = _HEAD.pack_into
    while pos < off:
        size = header.event_size(data, pos)
        pack(out, at, (size + 1) | seq << 24, 0)
        out[at + PACKET_HEAD : at + PACKET_HEAD + size] = data[pos : pos + size]
        at += PACKET_HEAD + size
        pos += size
        seq = (seq + 1) & 0xFF
    return out, off, n, seq


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
