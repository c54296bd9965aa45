"""Crash recovery of the newest output file, pure logic over its bytes: find the end of the
last complete transaction (see `Boundary`) and what lies after it (to truncate).

The boundary rule: the writer only ever appends whole transactions, each ending in exactly one
terminator event. In MARK mode (the dumper's) the terminator is the `CTS::<tso>` mark (a
ROWS_QUERY event in the mysql flavour, a BINLOG_CHECKPOINT in the mariadb one:
`cdc.binlog.events.cts_mark_text`); in COMMIT mode it is XID, a QUERY other than BEGIN (standalone DDL), or a CTS mark. File-level
events (the header, ROTATE, STOP) are also clean points. Everything after the last clean point
(a partial event, a CRC failure, an incomplete transaction) is the torn tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cdc.binlog.constants import BINLOG_MAGIC, HEADER_LEN, QUERY_POST_HEADER_LEN, EventType
from cdc.binlog.errors import CodecError
from cdc.binlog.events import cts_mark_text, parse_cts
from cdc.binlog.query import text_start
from cdc.binlog.reader import EventReader


class Boundary(StrEnum):
    MARK = "mark"  # a transaction ends with its CTS:: mark
    COMMIT = "commit"  # ... with XID, a standalone QUERY, or a CTS mark


_TERMINAL_FILE_EVENTS = (EventType.ROTATE, EventType.STOP)
# The GTIDs before a file, right after its FDE: part of the header (MySQL's or MariaDB's).
HEADER_GTID_EVENTS = (EventType.PREVIOUS_GTIDS, EventType.GTID_LIST)


def is_cts_mark(event: bytes | memoryview) -> bool:
    return cts_mark_text(event) is not None


def _is_standalone_query(event: bytes | memoryview) -> bool:
    if event[4] != EventType.QUERY or len(event) < HEADER_LEN + QUERY_POST_HEADER_LEN:
        return False
    start = text_start(event)
    text = bytes(event[start : start + 16]).lstrip().upper()
    return not (text.startswith(b"BEGIN") or text.startswith(b"XA START"))


def is_terminator(event: bytes | memoryview, boundary: Boundary) -> bool:
    if is_cts_mark(event):
        return True
    if boundary == Boundary.MARK:
        return False
    return event[4] == EventType.XID or _is_standalone_query(event)


@dataclass(slots=True)
class TailScan:
    """Result of scanning one file."""

    size: int  # bytes in the file
    header_end: (
        int  # after FDE (+ PREVIOUS_GTIDS or GTID_LIST); 0 if the header itself is incomplete
    )
    valid_end: int  # end of the last clean point: truncate the file here
    transactions: int  # complete transactions found
    last_cts: int | None  # TSO of the last CTS mark before valid_end
    last_txn_end: int | None  # end offset of the last complete transaction
    closed_by: int | None  # EventType.ROTATE / STOP if the file was closed, else None
    reason: str = ""  # why bytes after valid_end are dropped ("" if none)
    in_use: bool = False  # FDE in-use flag (set = not closed cleanly)
    last_mark: bytes | None = None  # the whole text of that CTS mark (`CTS::<tso>[::suffix]`)

    @property
    def torn_bytes(self) -> int:
        return self.size - self.valid_end


def scan(
    buf: bytes | bytearray | memoryview,
    *,
    boundary: Boundary = Boundary.MARK,
    file: str | None = None,
    anchor: tuple[int, bytes] | None = None,
) -> TailScan:
    """Walk the file and find the last clean point. Never raises for a torn tail; raises
    CodecError only if the file is not a binlog at all (bad magic).

    `anchor`: (pos, mark) of a verified durable transaction boundary and the text of the CTS
    mark ending there (`recovery_point`): only the header and the bytes after `pos` are read,
    and `transactions` counts those after it."""
    size = len(buf)
    if size < len(BINLOG_MAGIC) or bytes(buf[:4]) != BINLOG_MAGIC:
        if bytes(buf[: min(size, 4)]) == BINLOG_MAGIC[: min(size, 4)]:
            return TailScan(size, 0, 0, 0, None, None, None, "file header incomplete")
        raise CodecError("not a binlog file (bad magic)", file=file, pos=0)
    reader = EventReader(buf, file=file, allow_partial_tail=True)
    header_end = 0
    valid_end = 0
    txns = 0
    last_cts = None
    last_mark = None
    last_txn_end = None
    closed_by = None
    in_use = False
    reason = ""
    if anchor is not None:
        for ev in reader:  # the header only
            if ev.type_code == EventType.FORMAT_DESCRIPTION:
                in_use = bool(ev.header.flags & 1)
                header_end = ev.end
            elif ev.type_code in HEADER_GTID_EVENTS and ev.pos == header_end:
                header_end = ev.end
            else:
                break
        valid_end = last_txn_end = anchor[0]
        last_mark = anchor[1]
        last_cts = parse_cts(last_mark)
        reader = EventReader(
            buf, file=file, start=valid_end, fde=reader.fde, allow_partial_tail=True
        )
    try:
        for ev in reader:
            code = ev.type_code
            if code == EventType.FORMAT_DESCRIPTION:
                in_use = bool(ev.header.flags & 1)
                header_end = valid_end = ev.end
                continue
            if code in HEADER_GTID_EVENTS and valid_end == header_end == ev.pos:
                header_end = valid_end = ev.end
                continue
            if closed_by is not None:
                reason = f"event type {code} after the file was closed"
                break
            if code in _TERMINAL_FILE_EVENTS:
                closed_by = code
                valid_end = ev.end
                continue
            mark = cts_mark_text(ev.data)
            if mark is not None or (boundary != Boundary.MARK and is_terminator(ev.data, boundary)):
                txns += 1
                valid_end = last_txn_end = ev.end
                if mark is not None:
                    last_mark = mark
                    last_cts = parse_cts(last_mark)
    except CodecError as e:
        reason = e.reason
    if not reason and reader.tail:
        reason = f"partial event of {reader.tail} bytes at the end"
    if not reason and valid_end < reader.end:
        reason = "incomplete transaction at the end"
    if header_end == 0:
        valid_end = 0
        reason = reason or "file header incomplete"
    return TailScan(
        size,
        header_end,
        valid_end,
        txns,
        last_cts,
        last_txn_end,
        closed_by,
        reason,
        in_use,
        last_mark,
    )
