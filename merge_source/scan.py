"""The per-event hot loops of a MergeSource, over raw bytes, no objects per event but the event's
own bytes: splitting the dump stream into events, and cutting events into binlog groups.

Plain Python that Cython compiles unchanged when it is there (`setup.py` COMPILED lists this
module; `import merge_source.scan; merge_source.scan.COMPILED` says which one runs). Everything
unusual (ERR/EOF packets, rotations, heartbeats, multi-chunk packets, damage) stops the fast
loop and is handled by the caller in ordinary Python, which also words the error messages.
"""

from __future__ import annotations

import re

from cdc.compiled import is_compiled
from merge_source import zcrc

CRC32_RESIDUE = 0x2144DF1C  # zlib.crc32(data + crc32(data) as 4 LE bytes), for any data
MAX_CHUNK = 0xFFFFFF
ROTATE = 4
HEARTBEAT = 27
FDE = 15
GTID = 162
XID = 16
XA_PREPARE = 38
QUERY = 2
TABLE_MAP = 19
ANNOTATE_ROWS = 160
TRACE_OPEN, TRACE_CN, TRACE_CLOSE = b"/*CDC trace=", b" cn=", b" */"
TRACE_RE = re.compile(rb"/\*CDC trace=(\d+)\.(\d+) cn=(\d+) \*/")


def split_events(data: bytes, pos, verify) -> tuple[list[bytes], int]:  # C types: scan.pxd
    """Events of the complete dump packets in `data` from `pos`, and the offset it stopped at:
    the end of the data, a partial packet, or the first packet that is not a plain event of
    the file being read (ERR/EOF, ROTATE, heartbeat, an event without log_pos, a packet of
    16 MB or more, a short or damaged one: the caller looks at it closely)."""
    out: list[bytes] = []
    append = out.append
    end = len(data)
    residue, max_chunk, rotate, heartbeat = CRC32_RESIDUE, MAX_CHUNK, ROTATE, HEARTBEAT
    # Compiled, `p` is the bytes' buffer (scan.pxd) and the header fields are read from it in C,
    # no tuple nor int object per event; as Python it is the bytes and the same code indexes it.
    p = data
    while end - pos >= 24:
        length = p[pos] | p[pos + 1] << 8 | p[pos + 2] << 16
        stop = pos + 4 + length
        if p[pos + 4] != 0 or length < 20 or length >= max_chunk or stop > end:
            break
        code = p[pos + 9]
        size = p[pos + 14] | p[pos + 15] << 8 | p[pos + 16] << 16  # its 4th byte: 0 (< 16 MB)
        if (
            size != length - 1
            or p[pos + 17] != 0
            or p[pos + 18] | p[pos + 19] | p[pos + 20] | p[pos + 21] == 0  # log_pos 0
            or code == rotate
            or code == heartbeat
        ):
            break
        event = p[pos + 5 : stop]  # compiled: bytes straight from the buffer, no slice object
        if verify and zcrc.crc(event) != residue:  # compiled: zlib's C function (zcrc.pxd)
            break
        append(event)
        pos = stop
    return out, pos


def log_pos(data: bytes):  # C types: scan.pxd
    """An event's log_pos (header offset 13, u32): where the next event starts in its file."""
    return _header_u32(data, 13)


def timestamp(data: bytes):  # C types: scan.pxd
    """An event's timestamp (header offset 0, u32 seconds)."""
    return _header_u32(data, 0)


def _header_u32(data: bytes, at):  # C types: scan.pxd
    """The little-endian u32 at offset `at` of an event's header."""
    if len(data) < 19:
        raise ValueError(f"an event of {len(data)} bytes has no header")
    p = data
    v = p[at + 3]
    v = v << 8 | p[at + 2]
    v = v << 8 | p[at + 1]
    return v << 8 | p[at]


def group_end(data: bytes, standalone) -> bool:  # C types: scan.pxd
    """Whether a QUERY event inside a group is its terminator (a standalone group's only one;
    otherwise COMMIT, XA COMMIT, XA ROLLBACK)."""
    if standalone:
        return True
    db_len = data[27]
    status_len = data[30] | data[31] << 8
    start = 32 + status_len + db_len + 1
    text = data[start : min(start + 12, len(data) - 4)].upper()  # without the CRC
    return text.startswith((b"COMMIT", b"XA COMMIT", b"XA ROLLBACK"))


def group_body(events: list, i, standalone) -> tuple[int, int, bool]:  # C: scan.pxd
    """How far the open group runs in `events` from `i`: (the index it stops at, the bytes of
    events[i:that index], whether the last of them is the terminator). It stops before a GTID or
    FORMAT_DESCRIPTION (the assembler handles those) and after the terminator."""
    n = len(events)
    size = 0
    gtid, fde, xid, xa_prepare, query = GTID, FDE, XID, XA_PREPARE, QUERY
    while i < n:
        data = events[i]
        p = data
        code = p[4]
        if code == gtid or code == fde:
            return i, size, False
        size += len(data)
        i += 1
        if code == xid or code == xa_prepare or (code == query and group_end(data, standalone)):
            return i, size, True
    return i, size, False


def row_parts(events: list, private_db: bytes) -> list | None:  # C types: scan.pxd
    """The statements of a group's events: [(ANNOTATE_ROWS event or None, [TABLE_MAP, rows,
    ...])], one per ANNOTATE_ROWS (row events before any ANNOTATE_ROWS make one without it);
    other events (XA END, XID, ...) are left out. None if a TABLE_MAP names a table of
    `private_db`: the classifier then reads the group closely. The caller reads the TraceId
    (`annotate_trace`) of the statements it keeps only: a commit record's has none, and
    looking for one runs a regex."""
    parts: list = []
    current: list | None = None
    db_len = len(private_db)
    for data in events:
        p = data
        code = p[4]
        if code == ANNOTATE_ROWS:
            current = []
            parts.append((data, current))
        elif code == TABLE_MAP or (code >= 23 and code <= 25) or (code >= 30 and code <= 32):
            if (
                code == TABLE_MAP
                and p[27] == db_len
                and len(data) >= 28 + db_len
                and _at(p, 28, private_db)
            ):
                return None
            if current is None:
                current = []
                parts.append((None, current))
            current.append(data)
    return parts


def _at(p, pos, literal: bytes) -> bool:  # C types: scan.pxd
    """Whether `literal` stands at `pos` of `p` (the caller knows it fits): compared in place,
    compiled (p a pointer), without slicing a bytes object out first."""
    for k in range(len(literal)):
        if p[pos + k] != literal[k]:
            return False
    return True


def annotate_trace(data: bytes) -> tuple[int, int] | None:  # C types: scan.pxd
    """The TraceId of the `/*CDC trace=<seq>.<subseq> cn=<id> */` hint in a raw ANNOTATE_ROWS
    event: read in place where the CN puts it (first in the statement), else searched for as
    the classifier always did (same answer: the regex's leftmost match)."""
    p = data
    end = min(len(data), 19 + 200)
    if end >= 31 and _at(p, 19, TRACE_OPEN):
        pos = 31
        seq = sub = 0
        digits = 0
        while pos < end and 48 <= p[pos] <= 57 and digits < 18:
            seq = seq * 10 + (p[pos] - 48)
            pos += 1
            digits += 1
        if digits and digits < 18 and pos < end and p[pos] == 46:  # "."
            pos += 1
            start = pos
            while pos < end and 48 <= p[pos] <= 57 and pos - start < 18:
                sub = sub * 10 + (p[pos] - 48)
                pos += 1
            if start < pos < start + 18 and pos + 4 <= end and _at(p, pos, TRACE_CN):
                pos += 4
                start = pos
                while pos < end and 48 <= p[pos] <= 57:
                    pos += 1
                if start < pos and pos + 3 <= end and _at(p, pos, TRACE_CLOSE):
                    return (seq, sub)
    m = TRACE_RE.search(data, 19, 19 + 200)
    return (int(m[1]), int(m[2])) if m else None


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
