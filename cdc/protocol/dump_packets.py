"""A dump batch kept as the packets it arrived in: COM_BINLOG_DUMP packets (3-byte length,
sequence id, the OK byte 0, the event), walked in place: the dump split's test of each packet
(`dump_stream`), and a MergeSource process's groups as ranges of packets of the batch
(`merge_source.scan.packed_*`), not a bytes object per event.

The plain-Python twin of `dump_packets.pxd` (a module of C declarations, like the codec's
`header.pxd`): compiled modules that `cimport` it run those inline C functions, plain Python
these (same results: tests/test_compiled.py).
"""

from __future__ import annotations

EVENT_AT = 5  # a packet's event starts after its 4-byte header and the OK byte
# The events a statement holds: TABLE_MAP and rows events (v1 and v2).
TABLE_MAP, V1_FIRST, V1_LAST, V2_FIRST, V2_LAST = 19, 23, 25, 30, 32


def packet_len(p, q) -> int:
    """The payload length of the packet at `q` (the OK byte and the event)."""
    return p[q] | p[q + 1] << 8 | p[q + 2] << 16


def event_code(p, q) -> int:
    """The event type of the packet at `q`."""
    return p[q + EVENT_AT + 4]


def is_row_event(code) -> bool:
    """A TABLE_MAP or rows event: what a statement holds."""
    return code == TABLE_MAP or V1_FIRST <= code <= V1_LAST or V2_FIRST <= code <= V2_LAST


def join_rows(data: bytes, q, stop, size) -> bytes:
    """The TABLE_MAP and rows events of the packets from `q` to `stop`, concatenated (`size`
    bytes): a statement as the wire sends it."""
    out = b"".join(
        [
            data[q + EVENT_AT : q + 4 + n]
            for q, n in _packets(data, q, stop)
            if is_row_event(event_code(data, q))
        ]
    )
    if len(out) != size:
        raise ValueError("a statement's events do not add up to their size")
    return out


def _packets(data, q, stop):
    while q < stop:
        n = packet_len(data, q)
        yield q, n
        q += 4 + n


def splice(data: bytes, at, size, insert: bytes) -> bytes:
    """`data` with its `size` bytes at `at` replaced by `insert` (an event of a statement's
    concatenated events renamed or dropped), in one copy."""
    return b"".join((data[:at], insert, data[at + size :]))


def splice_body(data: bytes, at, size, body: bytes) -> bytes:
    """`splice` of the event at `at` by one of the same header but `body` (its size field
    rewritten): a renamed TABLE_MAP, whose body a cache keeps apart from the header that
    changes every time (its timestamp, log_pos), in one copy."""
    head = data[at : at + 9] + (19 + len(body)).to_bytes(4, "little") + data[at + 13 : at + 19]
    return b"".join((data[:at], head, body, data[at + size :]))
