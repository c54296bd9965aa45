"""Rows sent as packets a batch at a time: the payloads of a streamed result (a snapshot read's
text rows) framed into one buffer in one pass, as `Conn.send` frames one. Python spent about
0.5 µs a row there (a packed header, a concatenation, a list entry, then a join).

Plain Python that Cython compiles unchanged when it is there (cdc/compiled.py lists this
module; row_packets.pxd gives its C types; `COMPILED` says which one runs). A payload of 16 MB
or more, which must be split into several packets, stops the batch: the caller sends it alone
(`Conn.send`)."""

from __future__ import annotations

from cdc.compiled import is_compiled
from cdc.protocol.packets import MAX_CHUNK, frame


def frame_rows(rows: list, start, stop, seq) -> tuple:  # C types: row_packets.pxd
    """(packets, how many rows they hold, the sequence id after them) for rows[start:stop],
    the first packet with sequence id `seq`; fewer rows than asked when one must be split."""
    total = 0
    n = start
    while n < stop:
        size = len(rows[n])
        if size >= MAX_CHUNK:
            break
        total += 4 + size
        n += 1
    if not COMPILED:
        parts = []
        for k in range(start, n):
            data, seq = frame(rows[k], seq)
            parts.append(data)
        return b"".join(parts), n - start, seq
    out = bytearray(total)
    q = out  # C: the bytearray's buffer, each byte written in C
    at = 0
    for k in range(start, n):
        row = rows[k]
        p = row  # C: the bytes' buffer
        size = len(row)
        q[at] = size & 0xFF
        q[at + 1] = (size >> 8) & 0xFF
        q[at + 2] = (size >> 16) & 0xFF
        q[at + 3] = seq
        at += 4
        for i in range(size):
            q[at + i] = p[i]
        at += size
        seq = (seq + 1) & 0xFF
    return out, n - start, seq


def stamp(data: bytearray, seq) -> int:  # C types: row_packets.pxd
    """The packets framed in `data` (sequence ids left 0: `cdc.protocol.framed_rows`) given
    theirs, the first `seq`; returns the id after them."""
    q = data  # C: the bytearray's buffer
    end = len(data)
    at = 0
    while at < end:
        q[at + 3] = seq
        seq = (seq + 1) & 0xFF
        at += 4 + (q[at] | q[at + 1] << 8 | q[at + 2] << 16)
    return seq


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
