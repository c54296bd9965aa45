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
from cdc.protocol import dump_packets
from cdc.protocol.packets import MAX_CHUNK

assert MAX_CHUNK == 0xFFFFFF  # written as a literal below: a C constant, compiled


def split_events(data: bytes, pos, verify) -> tuple[list[bytes], int]:  # C: dump_stream.pxd
    """Events of the complete dump packets in `data` from `pos`, and the offset it stopped at:
    the end of the data, a partial packet, or the first packet that is not a plain event of
    the file being read (ERR/EOF, ROTATE, heartbeat, an event without log_pos, a packet of
    16 MB or more, a short or damaged one: the caller looks at it closely)."""
    out: list[bytes] = []
    append = out.append
    end = len(data)
    p = data  # compiled: the bytes' buffer (dump_stream.pxd)
    while True:
        stop = _plain_event(data, pos, end, verify)
        if stop < 0:
            return out, pos
        append(p[pos + dump_packets.EVENT_AT : stop])  # compiled: bytes straight from the buffer
        pos = stop


def scan_events(data: bytes, pos, verify) -> tuple[int, int]:  # C: dump_stream.pxd
    """`split_events` that leaves the events in `data`, as their packets (a MergeSource
    process's batch: merge_source/packets.py): the offset it stopped at, and the log_pos of
    the last event taken (0: none)."""
    end = len(data)
    last = 0
    p = data  # compiled: the bytes' buffer (dump_stream.pxd)
    while True:
        stop = _plain_event(data, pos, end, verify)
        if stop < 0:
            return pos, last
        last = header.log_pos(p, pos + dump_packets.EVENT_AT)
        pos = stop


def _plain_event(data: bytes, pos, end, verify):  # C types: dump_stream.pxd
    """Where the packet at `pos` ends if it is a complete plain event of the file (its CRC
    checked if `verify`), else -1."""
    # Compiled, `p` is the bytes' buffer (dump_stream.pxd) and the header fields are read from
    # it in C, no tuple nor int object per event; as Python it is the bytes and the same code
    # indexes it.
    p = data
    if end - pos < dump_packets.EVENT_AT + constants.HEADER_LEN:
        return -1
    length = p[pos] | p[pos + 1] << 8 | p[pos + 2] << 16
    stop = pos + 4 + length
    if p[pos + 4] != 0 or length <= constants.HEADER_LEN or length >= 0xFFFFFF or stop > end:
        return -1
    at = pos + dump_packets.EVENT_AT
    code = p[at + header.OFF_TYPE]
    if (
        header.event_size(p, at) != length - 1
        or header.log_pos(p, at) == 0
        or code == constants.EventType.ROTATE
        or code == constants.EventType.HEARTBEAT
    ):
        return -1
    if verify and zcrc.crc_at(p, at, stop - at) != constants.CRC32_RESIDUE:  # C: zcrc.pxd
        return -1
    return stop


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
