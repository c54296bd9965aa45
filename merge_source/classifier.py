"""Classify a binlog group by what the CN commit protocol made of it (design.md §2).

Row events of user tables stay raw bytes; only the few private rows (commit records, markers)
are decoded. The private table definitions are the CN's contract (`cdc/cn/schema.py`).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from cdc.binlog.constants import EventType
from cdc.binlog.events import body_view
from cdc.binlog.fde import FormatDescription
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column, TableMapEvent
from cdc.cn.schema import DDL_RECORD, HEARTBEAT, INSTRUCTION, PRIVATE_DB, TX_LOG
from cdc.cn.xid import FORMAT_ID, GTRID_PREFIX
from merge_source.fragment import FragmentKind, Statement, TraceId
from merge_source.group import GTID_FLAGS2_OFFSET, BinlogGroup, query_text

TABLE_MAP = int(EventType.TABLE_MAP)
ANNOTATE_ROWS = int(EventType.ANNOTATE_ROWS)
QUERY = int(EventType.QUERY)
ROWS_TYPES = frozenset({23, 24, 25, 30, 31, 32})
WRITE_TYPES = frozenset({23, 30})
UPDATE_TYPES = frozenset({24, 31})
FL_GROUP_COMMIT_ID = 0x02
FL_PREPARED_XA = 0x40
FL_COMPLETED_XA = 0x80
PRIVATE_DB_B = PRIVATE_DB.encode()
GTRID_PREFIX_B = GTRID_PREFIX.encode()
TRACE_RE = re.compile(rb"/\*CDC trace=(\d+)\.(\d+) cn=(\d+) \*/")
MARKER_TABLES = {
    INSTRUCTION.encode(): FragmentKind.INSTRUCTION,
    DDL_RECORD.encode(): FragmentKind.DDL,
}


class ClassifyError(RuntimeError):
    """A group the commit protocol cannot have produced (or an unreadable private row)."""


class GroupKind(Enum):
    XA_PREPARE = "xa_prepare"  # a CN branch: held by the sorter until committed/rolled back
    XA_COMMIT = "xa_commit"
    XA_ROLLBACK = "xa_rollback"
    FOREIGN_PREPARE = "foreign_prepare"  # XA of another program: local once committed
    COMMIT_RECORD = "commit_record"
    PRIVATE = "private"  # other writes to __cdc__ (purges, setup): dropped
    DDL = "ddl"  # physical DDL on the DN: tracked, never emitted as such
    LOCAL = "local"  # a plain transaction on user tables


@dataclass(frozen=True, slots=True)
class CommitRecord:
    txn_id: int
    tso: int
    participants: tuple[int, ...]
    aborted: bool


@dataclass(slots=True)
class Classified:
    kind: GroupKind
    txn_id: int = 0
    xid: bytes = b""  # raw gtrid+bqual key, for XA groups
    fragment_kind: FragmentKind = FragmentKind.DATA
    statements: list[Statement] = field(default_factory=list)
    records: list[CommitRecord] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)
    query: bytes = b""  # the statement of a DDL group


def table_name(event: bytes) -> tuple[bytes, bytes]:
    """(db, table) of a raw MariaDB TABLE_MAP event (6-byte table id post-header)."""
    db_len = event[27]
    db = event[28 : 28 + db_len]
    pos = 28 + db_len + 1
    tbl_len = event[pos]
    return bytes(db), bytes(event[pos + 1 : pos + 1 + tbl_len])


def gtid_xid(gtid: bytes) -> tuple[int, bytes, bytes]:
    """(formatID, gtrid, bqual) carried by an XA GTID event."""
    pos = GTID_FLAGS2_OFFSET + 1
    if gtid[GTID_FLAGS2_OFFSET] & FL_GROUP_COMMIT_ID:
        pos += 8
    fmt, glen, blen = struct.unpack_from("<iBB", gtid, pos)
    pos += 6
    return fmt, bytes(gtid[pos : pos + glen]), bytes(gtid[pos + glen : pos + glen + blen])


def cn_txn_id(fmt: int, gtrid: bytes) -> int | None:
    if fmt != FORMAT_ID or not gtrid.startswith(GTRID_PREFIX_B):
        return None
    try:
        return int(gtrid[len(GTRID_PREFIX_B) :])
    except ValueError:
        return None


def trace_of(annotate: bytes) -> TraceId | None:
    m = TRACE_RE.search(annotate, 19, 19 + 200)
    return (int(m.group(1)), int(m.group(2))) if m else None


class Classifier:
    """Stateless but for caches of decoded private TABLE_MAPs; one per DN."""

    def __init__(self, fde: FormatDescription | None = None):
        self.fde = fde
        self._columns: dict[bytes, list[Column]] = {}

    def classify(self, group: BinlogGroup) -> Classified:
        flags2 = group.flags2
        if flags2 & FL_PREPARED_XA:
            fmt, gtrid, bqual = gtid_xid(group.gtid.data)
            txn_id = cn_txn_id(fmt, gtrid)
            out = self._rows(group, Classified(GroupKind.XA_PREPARE, xid=gtrid + b"/" + bqual))
            if txn_id is None:
                out.kind = GroupKind.FOREIGN_PREPARE
                out.fragment_kind = FragmentKind.LOCAL
            else:
                out.txn_id = txn_id
            return out
        if flags2 & FL_COMPLETED_XA:
            fmt, gtrid, bqual = gtid_xid(group.gtid.data)
            text = next((query_text(e) for e in group.events if e.data[4] == QUERY), b"").upper()
            kind = GroupKind.XA_COMMIT if text.startswith(b"XA COMMIT") else GroupKind.XA_ROLLBACK
            return Classified(kind, txn_id=cn_txn_id(fmt, gtrid) or 0, xid=gtrid + b"/" + bqual)
        if len(group.events) == 2 and group.events[1].data[4] == QUERY:
            return Classified(GroupKind.DDL, query=query_text(group.events[1]))
        return self._rows(group, Classified(GroupKind.LOCAL, fragment_kind=FragmentKind.LOCAL))

    def _rows(self, group: BinlogGroup, out: Classified) -> Classified:
        """Split a group's row events into statements; route private tables."""
        statement: Statement | None = None
        table_maps: dict[int, bytes] = {}  # table_id -> raw TABLE_MAP of a private table
        private: set[bytes] = set()
        user_rows = False
        for ev in group.events[1:]:
            data = ev.data
            code = data[4]
            if code == ANNOTATE_ROWS:
                statement = Statement(trace_of(data))
                out.statements.append(statement)
            elif code == TABLE_MAP:
                db, table = table_name(data)
                if db == PRIVATE_DB_B:
                    private.add(table)
                    table_maps[int.from_bytes(data[19:25], "little")] = data
                    continue
                if statement is None:
                    statement = Statement(None)
                    out.statements.append(statement)
                statement.events.append(data)
            elif code in ROWS_TYPES:
                table_id = int.from_bytes(data[19:25], "little")
                if table_id in table_maps:
                    self._private_rows(table_maps[table_id], data, out)
                    continue
                user_rows = True
                if statement is None:
                    statement = Statement(None)
                    out.statements.append(statement)
                statement.events.append(data)
        out.statements = [s for s in out.statements if s.events]
        if private and not user_rows:
            if TX_LOG.encode() in private and out.kind is GroupKind.LOCAL:
                out.kind = GroupKind.COMMIT_RECORD if out.records else GroupKind.PRIVATE
            elif HEARTBEAT.encode() in private:
                out.fragment_kind = FragmentKind.HEARTBEAT
            else:
                marker = next((MARKER_TABLES[t] for t in private if t in MARKER_TABLES), None)
                if marker is not None:
                    out.fragment_kind = marker
                elif out.kind is GroupKind.LOCAL:
                    out.kind = GroupKind.PRIVATE
        return out

    def _private_rows(self, table_map: bytes, rows: bytes, out: Classified) -> None:
        if self.fde is None:
            raise ClassifyError("a private row event arrived before the DN's FORMAT_DESCRIPTION")
        _db, table = table_name(table_map)
        key = bytes(table_map[19:-4])
        columns = self._columns.get(key)
        if columns is None:
            tm = TableMapEvent.parse(body_view(table_map, self.fde), self.fde)
            columns = tm.columns(mariadb=True)
            if any(c.name is None for c in columns):
                raise ClassifyError(
                    f"__cdc__.{table.decode()} has no column names: set binlog_row_metadata=FULL on the DN"
                )
            if len(self._columns) > 256:
                self._columns.clear()
            self._columns[key] = columns
        code = rows[4]
        if code not in WRITE_TYPES and code not in UPDATE_TYPES:
            return  # DELETEs of private rows (commit-record purges) carry nothing we need
        ev = RowsEvent.parse(body_view(rows, self.fde), self.fde, code)
        names = [c.name.decode() for c in columns]  # type: ignore[union-attr]
        images = ev.decode_rows(columns)
        for image in images:
            row = image[1] if code in UPDATE_TYPES else image
            values = dict(zip(names, row, strict=True))
            if table == TX_LOG.encode():
                out.records.append(
                    CommitRecord(
                        int(values["txn_id"]),
                        int(values["commit_tso"]),
                        tuple(int(x) for x in _text(values["participants"]).split(",") if x),
                        bool(values["aborted"]),
                    )
                )
            elif table in MARKER_TABLES:
                out.markers.append(
                    {k: _text(v) if isinstance(v, bytes) else v for k, v in values.items()}
                )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
