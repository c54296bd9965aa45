"""The per-event hot loops of a MergeSource, over raw event bytes, no objects per event but the
event's own bytes: cutting events into binlog groups and finding a statement's rows. (The dump
stream's split into events is the foundation's: `cdc.protocol.dump_stream`.)

Plain Python that Cython compiles unchanged when it is there (`setup.py` COMPILED lists this
module; `import merge_source.scan; merge_source.scan.COMPILED` says which one runs). Event
codes, header offsets and the QUERY statement's offset are the codec's
(`cdc.binlog.constants`/`header`/`query`, C when compiled: scan.pxd cimports them).
"""

from __future__ import annotations

import re

from cdc.binlog import constants, header, query
from cdc.compiled import is_compiled
from cdc.protocol import dump_packets
from merge_source.fragment import Statement

TRACE_OPEN, TRACE_CN, TRACE_CLOSE = b"/*CDC trace=", b" cn=", b" */"
TRACE_RE = re.compile(rb"/\*CDC trace=(\d+)\.(\d+) cn=(\d+) \*/")


def log_pos(data: bytes):  # C types: scan.pxd
    """An event's log_pos (header offset 13, u32): where the next event starts in its file."""
    if len(data) < constants.HEADER_LEN:
        raise ValueError(f"an event of {len(data)} bytes has no header")
    return header.log_pos(data, 0)


def timestamp(data: bytes):  # C types: scan.pxd
    """An event's timestamp (header offset 0, u32 seconds)."""
    if len(data) < constants.HEADER_LEN:
        raise ValueError(f"an event of {len(data)} bytes has no header")
    return header.timestamp(data, 0)


def group_end(data: bytes, standalone) -> bool:  # C types: scan.pxd
    """Whether a QUERY event inside a group is its terminator (a standalone group's only one;
    otherwise COMMIT, XA COMMIT, XA ROLLBACK)."""
    if standalone:
        return True
    if len(data) < constants.HEADER_LEN + constants.QUERY_POST_HEADER_LEN:
        raise IndexError(f"a QUERY event of {len(data)} bytes has no post-header")
    start = query.text_start(data, 0)  # compiled: read from the bytes' buffer in C
    text = data[start : min(start + 12, len(data) - 4)].upper()  # without the CRC
    return text.startswith((b"COMMIT", b"XA COMMIT", b"XA ROLLBACK"))


def group_end_at(data: bytes, at, n, standalone) -> bool:  # C types: scan.pxd
    """`group_end` of the event `data[at:at + n]` read where it lies (a packed group's QUERY
    in its dump batch), without slicing it out."""
    if standalone:
        return True
    if n < constants.HEADER_LEN + constants.QUERY_POST_HEADER_LEN:
        raise IndexError(f"a QUERY event of {n} bytes has no post-header")
    p = data
    start = query.text_start(p, at)
    stop = min(start + 12, at + n - 4)  # without the CRC
    return (
        _upper_at(p, start, stop, b"COMMIT")
        or _upper_at(p, start, stop, b"XA COMMIT")
        or _upper_at(p, start, stop, b"XA ROLLBACK")
    )


def _upper_at(p, start, stop, word: bytes) -> bool:  # C types: scan.pxd
    """Whether `p[start:stop].upper()` starts with `word` (upper case), compared in place."""
    if stop - start < len(word):
        return False
    for k in range(len(word)):
        c = p[start + k]
        if 97 <= c <= 122:  # a-z: what bytes.upper() changes
            c -= 32
        if c != word[k]:
            return False
    return True


def group_body(events: list, i, standalone) -> tuple[int, int, bool]:  # C: scan.pxd
    """How far the open group runs in `events` from `i`: (the index it stops at, the bytes of
    events[i:that index], whether the last of them is the terminator). It stops before a GTID or
    FORMAT_DESCRIPTION (the assembler handles those) and after the terminator."""
    n = len(events)
    size = 0
    gtid, fde = constants.EventType.MARIADB_GTID, constants.EventType.FORMAT_DESCRIPTION
    xid, xa_prepare, query = (
        constants.EventType.XID,
        constants.EventType.XA_PREPARE,
        constants.EventType.QUERY,
    )
    while i < n:
        data = events[i]
        p = data
        code = p[header.OFF_TYPE]
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
    annotate_rows, table_map = constants.EventType.ANNOTATE_ROWS, constants.EventType.TABLE_MAP
    v1_first, v1_last = constants.EventType.WRITE_ROWS_V1, constants.EventType.DELETE_ROWS_V1
    v2_first, v2_last = constants.EventType.WRITE_ROWS, constants.EventType.DELETE_ROWS
    db_at = constants.TABLE_MAP_DB_LEN_OFFSET
    for data in events:
        p = data
        code = p[header.OFF_TYPE]
        if code == annotate_rows:
            current = []
            parts.append((data, current))
        elif code == table_map or v1_first <= code <= v1_last or v2_first <= code <= v2_last:
            if (
                code == table_map
                and p[db_at] == db_len
                and len(data) >= db_at + 1 + db_len
                and _at(p, db_at + 1, private_db)
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
    text = constants.HEADER_LEN  # ANNOTATE_ROWS: the statement follows the header
    end = min(len(data), text + 200)
    if end >= text + 12 and _at(p, text, TRACE_OPEN):
        pos = text + 12  # after TRACE_OPEN
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
    m = TRACE_RE.search(data, text, text + 200)
    return (int(m[1]), int(m[2])) if m else None


# -- a dump batch kept as its packets (cdc/protocol/dump_packets.py): groups as packet ranges -------
def packed_events(data: bytes, q, stop) -> list:  # C types: scan.pxd
    """The events of the packets `data[q:stop]`, as bytes (a group handed to the general path)."""
    out = []
    p = data
    while q < stop:
        n = dump_packets.packet_len(p, q)
        out.append(p[q + dump_packets.EVENT_AT : q + 4 + n])
        q += 4 + n
    return out


def packed_group(data: bytes, q, stop, standalone) -> tuple:  # C types: scan.pxd
    """`group_body` over the packets `data[q:stop]`: (the packet it stops at, whether the one
    before it is the terminator, the log_pos of that one: where the group ends)."""
    p = data
    gtid, fde = constants.EventType.MARIADB_GTID, constants.EventType.FORMAT_DESCRIPTION
    xid, xa_prepare = constants.EventType.XID, constants.EventType.XA_PREPARE
    query_code = constants.EventType.QUERY
    while q < stop:
        code = dump_packets.event_code(p, q)
        if code == gtid or code == fde:
            return q, False, 0
        n = dump_packets.packet_len(p, q)
        at = q + dump_packets.EVENT_AT
        q += 4 + n
        if (
            code == xid
            or code == xa_prepare
            or (code == query_code and group_end_at(data, at, n - 1, standalone))
        ):
            return q, True, header.log_pos(p, at)
    return q, False, 0


def packed_count(data: bytes, q, stop, code) -> int:  # C types: scan.pxd
    """How many of the packets `data[q:stop]` hold an event of type `code` (all: -1)."""
    p = data
    count = 0
    while q < stop:
        if code < 0 or dump_packets.event_code(p, q) == code:
            count += 1
        q += 4 + dump_packets.packet_len(p, q)
    return count


def packed_find(data: bytes, q, stop, code):  # C types: scan.pxd
    """The offset of the first of the packets `data[q:stop]` with an event of type `code`, or
    -1."""
    p = data
    while q < stop:
        if dump_packets.event_code(p, q) == code:
            return q
        q += 4 + dump_packets.packet_len(p, q)
    return -1


def packed_statements(data: bytes, q, stop, private_db: bytes) -> list | None:  # C: scan.pxd
    """`row_parts` over the packets `data[q:stop]`, made into the statements: each one bytes
    object of its events (`Statement.packed`, copied once from the batch). None if a TABLE_MAP
    names a table of `private_db` (the classifier then reads the group closely)."""
    out: list = []
    p = data
    annotate = None
    first = -1  # the open statement's first packet (-1: none open)
    size = 0
    db_len = len(private_db)
    annotate_rows, table_map = constants.EventType.ANNOTATE_ROWS, constants.EventType.TABLE_MAP
    db_at = constants.TABLE_MAP_DB_LEN_OFFSET
    while q < stop:
        code = dump_packets.event_code(p, q)
        n = dump_packets.packet_len(p, q)
        at = q + dump_packets.EVENT_AT
        if code == annotate_rows:
            if size:
                out.append(_joined(data, annotate, first, q, size))
            annotate = p[at : at + n - 1]
            first, size = q + 4 + n, 0
        elif dump_packets.is_row_event(code):
            if (
                code == table_map
                and p[at + db_at] == db_len
                and n - 1 >= db_at + 1 + db_len
                and _at(p, at + db_at + 1, private_db)
            ):
                return None
            if first < 0:
                annotate, first = None, q
            size += n - 1
        q += 4 + n
    if size:
        out.append(_joined(data, annotate, first, q, size))
    return out


def _joined(data: bytes, annotate, first, stop, size) -> Statement:  # C types: scan.pxd
    trace = None if annotate is None else annotate_trace(annotate)
    return Statement(trace, None, None, dump_packets.join_rows(data, first, stop, size))


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
