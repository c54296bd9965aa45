"""Classify a binlog group by what the CN commit protocol made of it (docs/protocol.md, "Ordering").

Row events of user tables stay raw bytes; only the few private rows (commit records, markers)
are decoded. The private table definitions are the CN's contract (`cdc/cn_protocol/schema.py`).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from cdc import named_tuple  # NamedTuples built in C (compiled: named_tuple.pxd)
from cdc.binlog import constants, header, query, splice
from cdc.binlog.constants import ROWS_TYPES, UPDATE_TYPES, ColumnType
from cdc.binlog.events import body_view
from cdc.binlog.fde import FormatDescription
from cdc.binlog.flavor import (
    FL_COMPLETED_XA,
    FL_GROUP_COMMIT_ID,
    FL_PREPARED_XA,
    GTID_FLAGS2_OFFSET,
    MARIADB,
)
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column, TableMapEvent
from cdc.cn_protocol.schema import DDL_RECORD, HEARTBEAT, INSTRUCTION, PRIVATE_DB, TX_LOG
from cdc.cn_protocol.xid import FORMAT_ID, GTRID_PREFIX
from cdc.protocol import dump_packets
from merge_source.fragment import FragmentKind, Statement
from merge_source.group import BinlogGroup, query_text
from merge_source.scan import (
    annotate_trace,
    packed_count,
    packed_events,
    packed_find,
    packed_statements,
    row_parts,
)
from merge_source.spill import SpanWriter, SpillFile

# Event codes are the codec's (C constants compiled: classifier.pxd cimports them).
WRITE_TYPES = frozenset({constants.EventType.WRITE_ROWS_V1, constants.EventType.WRITE_ROWS})
PRIVATE_DB_B = PRIVATE_DB.encode()
TX_LOG_B = TX_LOG.encode()
HEARTBEAT_B = HEARTBEAT.encode()
GTRID_PREFIX_B = GTRID_PREFIX.encode()
XA_COMMIT_B = b"XA COMMIT"
MARKER_TABLES = {
    INSTRUCTION.encode(): FragmentKind.INSTRUCTION,
    DDL_RECORD.encode(): FragmentKind.DDL,
}


class ClassifyError(RuntimeError):
    """A group the commit protocol cannot have produced (or an unreadable private row)."""


class StatementLogged(ClassifyError):
    """A write the DN logged as a statement (binlog_format STATEMENT or MIXED), not as rows:
    nothing of it can be renamed, split by shard or put in the global binlog, and dropping it
    would lose the write. The MergeSource stops on it, as on a corrupt binlog (docs/faults.md)."""


# The first word of a statement-logged write (after comments: the CN's TraceId hint). What a DN
# logs as QUERY events in ROW format is never one of these: DDL, XA END/COMMIT/ROLLBACK, COMMIT
# of a non-transactional table, SAVEPOINT, ROLLBACK TO, account statements.
DML_WORDS = frozenset({b"INSERT", b"UPDATE", b"DELETE", b"REPLACE", b"LOAD", b"WITH"})


def statement_dml(text: bytes) -> bool:
    """Whether a QUERY event's statement is a write of rows (a DML statement)."""
    pos, end = 0, len(text)
    while pos < end:
        if text[pos] in b" \t\r\n(":
            pos += 1
        elif text.startswith(b"/*", pos):
            close = text.find(b"*/", pos + 2)
            if close < 0:
                return False
            pos = close + 2
        else:
            break
    stop = pos
    while stop < end and (65 <= text[stop] <= 90 or 97 <= text[stop] <= 122):
        stop += 1
    return text[pos:stop].upper() in DML_WORDS


def refuse_statement_dml(group: BinlogGroup, expected_queries) -> None:  # C types: .pxd
    """Raise `StatementLogged` if `group` holds a QUERY event that writes rows. A group of a DN
    in ROW format holds `expected_queries` QUERY events (an XA prepare group: its XA END) or
    fewer, bar a SAVEPOINT or a non-transactional table's COMMIT: only a group with more has its
    statements read. (Compiled: the count is a C loop over the group's list, classifier.pxd.)"""
    queries = 0
    code = constants.EventType.QUERY
    for e in group.events:  # (a spilled group: read below, rare and huge anyway)
        if e[4] == code:
            queries += 1
    if queries <= expected_queries and group.span is None:
        return
    for data in group.body():
        if data[4] == code:
            text = query_text(data)
            if statement_dml(text):
                raise StatementLogged(
                    f"{group.file}:{group.start}: a write logged as a statement, not as rows "
                    f"(binlog_format is STATEMENT or MIXED on this DN): "
                    f"{text[:200].decode(errors='replace')!r}. Its rows are in no binlog, so "
                    "the global binlog cannot carry it: set binlog_format=ROW on the DN (my.cnf "
                    "and SET GLOBAL), then re-copy what it changed since (docs/deploy.md, "
                    '"A DN turned to STATEMENT")'
                )


class GroupKind(Enum):
    XA_PREPARE = "xa_prepare"  # a CN branch: held by the sorter until committed/rolled back
    XA_COMMIT = "xa_commit"
    XA_ROLLBACK = "xa_rollback"
    FOREIGN_PREPARE = "foreign_prepare"  # XA of another program: local once committed
    COMMIT_RECORD = "commit_record"
    PRIVATE = "private"  # other writes to __cdc__ (purges, setup): dropped
    DDL = "ddl"  # physical DDL on the DN: tracked, never emitted as such
    LOCAL = "local"  # a plain transaction on user tables


class CommitRecord(NamedTuple):
    """A tuple, not a frozen dataclass: a frozen dataclass's __init__ (interpreted, one
    object.__setattr__ per field) cost more than reading the row."""

    txn_id: int
    tso: int
    participants: tuple[int, ...]
    aborted: bool


class Classified:
    """What a group is; a plain slots class, not a dataclass: one per group, built in the hot
    loop (its lists are made only when something goes in)."""

    __slots__ = (
        "kind",
        "txn_id",
        "xid",
        "fragment_kind",
        "statements",
        "records",
        "markers",
        "query",
    )

    def __init__(
        self,
        kind: GroupKind,
        txn_id: int = 0,
        # raw gtrid/bqual key (`xa_key`) of another program's XA group; b"" for the CN's
        xid: bytes = b"",
        fragment_kind: FragmentKind = FragmentKind.DATA,
        query: bytes = b"",  # the statement of a DDL group
    ):
        self.kind = kind
        self.txn_id = txn_id
        self.xid = xid
        self.fragment_kind = fragment_kind
        self.statements: list[Statement] = _NONE
        self.records: list[CommitRecord] = _NONE
        self.markers: list[dict[str, Any]] = _NONE
        self.query = query

    def __repr__(self) -> str:
        return f"Classified({self.kind}, txn {self.txn_id}, {len(self.statements)} statements)"


_NONE: list = []  # shared empty default: assigned over, never appended to
# Enum members as module constants: compiled, `GroupKind.X` is a global and an attribute lookup.
XA_PREPARE, XA_COMMIT, XA_ROLLBACK = (
    GroupKind.XA_PREPARE,
    GroupKind.XA_COMMIT,
    GroupKind.XA_ROLLBACK,
)
LOCAL, COMMIT_RECORD, PRIVATE = GroupKind.LOCAL, GroupKind.COMMIT_RECORD, GroupKind.PRIVATE
F_LOCAL = FragmentKind.LOCAL
F_DATA = FragmentKind.DATA


def _classified(kind, txn_id, xid, fragment_kind) -> Classified:  # C types: classifier.pxd
    """`Classified(kind, txn_id, xid, fragment_kind)` set field by field (compiled: no
    constructor call, one per group)."""
    c = Classified.__new__(Classified)
    c.kind = kind
    c.txn_id = txn_id
    c.xid = xid
    c.fragment_kind = fragment_kind
    c.statements = c.records = c.markers = _NONE
    c.query = b""
    return c


def table_name(event: bytes) -> tuple[bytes, bytes]:
    """(db, table) of a raw MariaDB TABLE_MAP event (6-byte table id post-header)."""
    db_len = event[27]
    db = event[28 : 28 + db_len]
    pos = 28 + db_len + 1
    tbl_len = event[pos]
    return bytes(db), bytes(event[pos + 1 : pos + 1 + tbl_len])


gtid_xid = MARIADB.gtid_xid  # (formatID, gtrid, bqual) of an XA GTID event


def cn_txn_id(fmt: int, gtrid: bytes) -> int | None:
    if fmt != FORMAT_ID or not gtrid.startswith(GTRID_PREFIX_B):
        return None
    try:
        return int(gtrid[len(GTRID_PREFIX_B) :])
    except ValueError:
        return None


def xa_ident(gtid: bytes) -> tuple[int | None, bytes]:
    """`cn_txn_id(*gtid_xid(gtid)[:2])` and the xid key `gtrid/bqual` of an XA GTID event."""
    return xa_txn(gtid), xa_key(gtid)


def _xid_at(gtid: bytes):  # C types: classifier.pxd
    """Where an XA GTID event's XID (formatID u32, gtrid and bqual lengths, the two) starts."""
    n = len(gtid)
    pos = GTID_FLAGS2_OFFSET + 1
    if n > GTID_FLAGS2_OFFSET and gtid[GTID_FLAGS2_OFFSET] & FL_GROUP_COMMIT_ID:
        pos += 8
    if pos + 6 > n:
        gtid_xid(gtid)  # raises, as it always did on a short GTID
    return pos


def xa_key(gtid: bytes) -> bytes:  # C types: classifier.pxd
    """The xid key `gtrid/bqual` of an XA GTID event: what holds another program's XA branch
    (`Classified.xid`). Made only where one is asked for: a CN branch is held by its
    transaction id, and a bytes key per CN group cost more than reading the id."""
    p = gtid
    n = len(gtid)
    pos = _xid_at(gtid)
    glen = p[pos + 4]
    blen = p[pos + 5]
    start = pos + 6
    if start + glen + blen <= n:  # compiled: bytes straight from the buffer
        return p[start : start + glen] + b"/" + p[start + glen : start + glen + blen]
    return gtid[start : start + glen] + b"/" + gtid[start + glen : start + glen + blen]


def xa_txn(gtid: bytes):  # C types: classifier.pxd
    """`cn_txn_id(*gtid_xid(gtid)[:2])` of an XA GTID event, the CN's id read in place (once
    per XA group; anything unusual goes the general way); None: not a CN transaction."""
    p = gtid
    n = len(gtid)
    pos = _xid_at(gtid)
    glen = p[pos + 4]
    start = pos + 6
    prefix = GTRID_PREFIX_B
    plen = len(prefix)
    fmt = p[pos] | p[pos + 1] << 8 | p[pos + 2] << 16 | p[pos + 3] << 24  # as unsigned
    if fmt != FORMAT_ID or glen <= plen or glen - plen > 18 or start + glen > n:
        return cn_txn_id(*gtid_xid(gtid)[:2])
    for k in range(plen):
        if p[start + k] != prefix[k]:
            return None
    txn = 0
    for k in range(start + plen, start + glen):
        digit = p[k] - 48
        if digit < 0 or digit > 9:  # not plain digits: int() decides, as it always did
            return cn_txn_id(*gtid_xid(gtid)[:2])
        txn = txn * 10 + digit
    return txn


def _prepared(out, txn_id, gtid):  # C types: classifier.pxd
    """An XA PREPARE's classification: a CN transaction's branch (`txn_id`), or (no CN xid)
    another program's XA, local once committed, held by its xid key."""
    if txn_id is None:
        out.kind = GroupKind.FOREIGN_PREPARE
        out.fragment_kind = FragmentKind.LOCAL
        out.xid = xa_key(gtid)
    else:
        out.txn_id = txn_id
    return out


def _resolved(commit, txn_id, gtid):  # C types: classifier.pxd
    """An XA COMMIT's or XA ROLLBACK's classification; its xid key only without a CN id (the
    processor reads it from the GTID when it holds another program's branches)."""
    kind = XA_COMMIT if commit else XA_ROLLBACK
    if txn_id is None:
        return _classified(kind, 0, xa_key(gtid), F_DATA)
    return _classified(kind, txn_id, b"", F_DATA)


def is_xa_commit(event: bytes) -> bool:  # C types: classifier.pxd
    """`query_text(event).upper().startswith(b"XA COMMIT")` without copying the statement."""
    if len(event) < constants.HEADER_LEN + constants.QUERY_POST_HEADER_LEN:
        return query_text(event).upper().startswith(XA_COMMIT_B)  # raises as it always did
    p = event
    start = query.text_start(p, 0)
    word = XA_COMMIT_B
    if len(event) - 4 - start < len(word):
        return False
    for k in range(len(word)):
        c = p[start + k]
        if 97 <= c <= 122:  # a-z: what bytes.upper() changes
            c -= 32
        if c != word[k]:
            return False
    return True


class Classifier:
    """Stateless but for caches of decoded private TABLE_MAPs; one per DN. (Compiled: a cdef
    class, classifier.pxd, `classify` a C call from the processor.)"""

    def __init__(self, fde: FormatDescription | None = None, spill_dir: str | None = None):
        self.fde = fde
        self.spill_dir = spill_dir  # where the statements of a spilled group are written
        # Decoded private TABLE_MAPs: body -> (columns, whether the commit-record fast path
        # fits, table name)
        self._columns: dict[bytes, tuple[list[Column], bool, bytes]] = {}
        # Table id -> body of a TABLE_MAP in `_columns` with the fast layout (commit records
        # read in place: `_packed_records`)
        self._tx_log_maps: dict[int, bytes] = {}
        self._v1_fde: FormatDescription | None = None
        self._v1: dict[int, bool] = {}
        self._checksum_len = 4  # of _v1_fde (a property of the FDE: a Python call)
        self.fast_records = True  # False: always the generic row decoder (tests compare both)

    def classify(self, group: BinlogGroup) -> Classified:
        if group.packed is not None:
            packed = self._packed(group)
            if packed is not None:
                return packed
            group.unpack()  # anything but a branch's or a local transaction's rows: as bytes
        flags2 = group.gtid[GTID_FLAGS2_OFFSET]
        if flags2 & FL_PREPARED_XA:
            refuse_statement_dml(group, 1)  # (its XA END)
            return _prepared(
                self._rows(group, Classified(XA_PREPARE)), xa_txn(group.gtid), group.gtid
            )
        if flags2 & FL_COMPLETED_XA:
            txn_id = xa_txn(group.gtid)
            commit = False
            for e in group.body():
                if e[4] == constants.EventType.QUERY:
                    commit = is_xa_commit(e)
                    break
            return _resolved(commit, txn_id, group.gtid)
        if group.count == 2:
            only = next(iter(group.body()))
            if only[4] == constants.EventType.QUERY:
                text = query_text(only)
                if statement_dml(text):  # (a statement-logged write to a MyISAM/Aria table)
                    refuse_statement_dml(group, 0)
                return Classified(GroupKind.DDL, query=text)
        # A local transaction in ROW format holds no QUERY but a non-transactional table's
        # COMMIT, a SAVEPOINT: read only then.
        refuse_statement_dml(group, 0)
        return self._rows(group, Classified(LOCAL, fragment_kind=F_LOCAL))

    def _packed(self, group: BinlogGroup) -> Classified | None:
        """`classify` of a packed group (still the dump batch's packets) that is an XA prepare
        or a local transaction of user rows only, its statements copied out of the batch in one
        compiled pass (`scan.packed_statements`); None for anything else (commit records,
        markers, XA COMMIT, DDL, a QUERY to look at): the caller unpacks it."""
        out: Classified
        data, first, last = group.packed, group.first, group.last
        flags2 = group.gtid[GTID_FLAGS2_OFFSET]
        query_code = constants.EventType.QUERY
        if flags2 & FL_PREPARED_XA:
            if packed_count(data, first, last, query_code) > 1:  # more than its XA END
                return None
            statements = packed_statements(data, first, last, PRIVATE_DB_B)
            if statements is None:
                return None
            out = _classified(XA_PREPARE, 0, b"", F_DATA)
            out.statements = statements
            return _prepared(out, xa_txn(group.gtid), group.gtid)
        if flags2 & FL_COMPLETED_XA:  # its XA COMMIT or XA ROLLBACK, read in place
            txn_id = xa_txn(group.gtid)
            at = packed_find(data, first, last, query_code)
            commit = at >= 0 and is_xa_commit(packed_events(data, at, last)[0])
            return _resolved(commit, txn_id, group.gtid)
        if packed_count(data, first, last, -1) == 1:
            return None
        if packed_count(data, first, last, query_code) > 0:
            return None
        statements = packed_statements(data, first, last, PRIVATE_DB_B)
        if statements is None:  # a private table: a commit record, read in place if it can be
            return self._packed_records(group)
        out = _classified(LOCAL, 0, b"", F_LOCAL)
        out.statements = statements
        return out

    def _packed_records(self, group: BinlogGroup) -> Classified | None:
        """A packed commit-record group, the way `_rows` reads it when everything fits its
        fast path: TABLE_MAPs of __cdc_tx_log__ already decoded (`_columns`), v1 WRITE/UPDATE
        rows of them read by `fast_commit_records`; the other events (ANNOTATE_ROWS, XID) carry
        nothing. None for anything else (the caller unpacks the group)."""
        fde = self.fde
        if fde is None or not self.fast_records:
            return None
        data, q, stop = group.packed, group.first, group.last
        p = data
        event_at = dump_packets.EVENT_AT
        table_map = constants.EventType.TABLE_MAP
        db_len = len(PRIVATE_DB_B)
        records = None
        table_id = 0  # of the last TABLE_MAP (if `mapped`): what the rows after it must name
        mapped = False
        while q < stop:
            code = dump_packets.event_code(p, q)
            n = dump_packets.packet_len(p, q)
            if code == table_map or dump_packets.is_row_event(code):
                at = q + event_at  # the event, read where it lies in the batch
                size = n - 1
                if size < 30:  # (too short for what is read below: the general way decides)
                    return None
                if code == table_map:
                    if p[at + 27] != db_len or size < 28 + db_len:
                        return None
                    if not splice.same(p, at + 28, db_len, PRIVATE_DB_B):
                        return None
                    table_id = header.table_id(p, at)
                    if not self._tx_log_map(data, at, size, table_id):
                        return None
                    mapped = True
                else:
                    if not mapped or header.table_id(p, at) != table_id:
                        return None
                    if (code != 23 and code != 24) or not self._v1_rows(fde, code):  # v1 W/U
                        return None
                    found = commit_records_at(data, at, at + size - self._checksum_len)
                    if found is None:
                        return None
                    records = found if records is None else records + found
            q += 4 + n
        if not records:
            return None
        out = _classified(COMMIT_RECORD, 0, b"", F_LOCAL)
        out.records = records
        return out

    def _tx_log_map(self, data: bytes, at, size, table_id) -> bool:
        """Whether the TABLE_MAP at `data[at:at + size]` is one of __cdc_tx_log__ decoded with
        the fast layout (`_columns`), asked by its table id: a repeat compares its body in
        place (a memcmp, compiled) where the body was sliced out and hashed every time."""
        known = self._tx_log_maps.get(table_id)
        if known is not None and splice.same(data, at + 19, size - 23, known):
            return True
        body = data[at + 19 : at + size - 4]
        cached = self._columns.get(body)
        if cached is None or not cached[1]:  # not the tx_log's fast layout (or not decoded)
            return False
        self._tx_log_maps[table_id] = body  # (cleared with `_columns`)
        return True

    def _rows(self, group: BinlogGroup, out: Classified) -> Classified:
        """Split a group's row events into statements; route private tables.

        The statements of a spilled group are written to a spill file of their own (the group's
        file is freed once classified): a held huge branch stays on disk until released.
        """
        if group.span is None:
            # Most groups touch no private table: their statements in one compiled pass.
            fast = row_parts(group.events, PRIVATE_DB_B)
            if fast is not None:
                out.statements = [
                    Statement(None if a is None else annotate_trace(a), e) for a, e in fast if e
                ]
                return out
        spill = SpillFile(self.spill_dir) if group.span is not None else None
        # (ANNOTATE_ROWS event or None, events) per statement; events: a list, or a SpanWriter
        # for a spilled group. The TraceId is read only for statements kept (not a commit
        # record's: it has none, and looking for one runs a regex).
        parts: list[tuple[bytes | None, list[bytes] | SpanWriter]] = []
        events: list[bytes] | SpanWriter | None = None  # the current statement's
        table_maps: dict[bytes, bytes] = {}  # raw table id -> raw TABLE_MAP of a private table
        private: set[bytes] = set()
        user_rows = False
        for data in group.body():
            code = data[4]
            if code == constants.EventType.ANNOTATE_ROWS:
                events = [] if spill is None else SpanWriter(spill)
                parts.append((data, events))
            elif code == constants.EventType.TABLE_MAP:
                if data[28 : 28 + data[27]] == PRIVATE_DB_B:
                    cached = self._columns.get(data[19:-4])  # its name without slicing it out
                    private.add(table_name(data)[1] if cached is None else cached[2])
                    table_maps[data[19:25]] = data
                    continue
                if events is None:
                    events = [] if spill is None else SpanWriter(spill)
                    parts.append((None, events))
                events.append(data)
            elif code in ROWS_TYPES:
                if table_maps:
                    table_map = table_maps.get(data[19:25])
                    if table_map is not None:
                        self._private_rows(table_map, data, out)
                        continue
                user_rows = True
                if events is None:
                    events = [] if spill is None else SpanWriter(spill)
                    parts.append((None, events))
                events.append(data)
        if spill is None:
            out.statements = [
                Statement(None if a is None else annotate_trace(a), e)  # type: ignore[arg-type]
                for a, e in parts
                if e
            ]
        else:
            out.statements = [
                Statement(None if a is None else annotate_trace(a), span=e.span())  # type: ignore[union-attr]
                for a, e in parts
                if e
            ]
        if private and not user_rows:
            if TX_LOG_B in private and out.kind is LOCAL:
                out.kind = COMMIT_RECORD if out.records else PRIVATE
            elif HEARTBEAT_B in private:
                out.fragment_kind = FragmentKind.HEARTBEAT
            else:
                marker = None  # a loop, not a generator: no closure in a cpdef method
                for t in private:
                    if t in MARKER_TABLES:
                        marker = MARKER_TABLES[t]
                        break
                if marker is not None:
                    out.fragment_kind = marker
                elif out.kind is LOCAL:
                    out.kind = PRIVATE
        return out

    def _v1_rows(self, fde, code) -> bool:  # C types: classifier.pxd (fde: FormatDescription)
        """Whether rows events of type `code` have the 8-byte post-header the fast reader
        expects (asked of the FDE once per FDE and type: a Python call per group otherwise)."""
        if fde is not self._v1_fde:
            self._v1_fde, self._v1, self._checksum_len = fde, {}, fde.checksum_len
        known = self._v1.get(code)
        if known is None:
            known = self._v1[code] = fde.post_header_len(code) == 8
        return known

    def _private_rows(self, table_map: bytes, rows: bytes, out: Classified) -> None:
        fde = self.fde
        if fde is None:
            raise ClassifyError("a private row event arrived before the DN's FORMAT_DESCRIPTION")
        key = table_map[19:-4]
        cached = self._columns.get(key)
        if cached is None:
            cached = self._table(table_map, key, fde)
        columns, fast, table = cached
        code = rows[4]
        if code not in WRITE_TYPES and code not in UPDATE_TYPES:
            return  # DELETEs of private rows (commit-record purges) carry nothing we need
        if table != TX_LOG_B and table not in MARKER_TABLES:
            return  # heartbeat rows: only their TSO matters, and it is in the commit record
        if fast and self.fast_records and code <= 24 and self._v1_rows(fde, code):
            records = fast_commit_records(rows, self._checksum_len)  # set by _v1_rows
            if records is not None:
                out.records = out.records + records  # a new list: the default is shared
                return
        self._generic_rows(rows, code, columns, table, out, fde)

    # The slow paths apart (compiled, a cpdef method may hold no generator expression).
    def _table(self, table_map: bytes, key: bytes, fde: FormatDescription) -> tuple:
        """Decode a private TABLE_MAP into the cache: (columns, fast path fits, table name)."""
        _db, table = table_name(table_map)
        tm = TableMapEvent.parse(body_view(table_map, fde), fde)
        columns = MARIADB.table_map_columns(tm)
        if any(c.name is None for c in columns):
            raise ClassifyError(
                f"__cdc__.{table.decode()} has no column names: set binlog_row_metadata=FULL on the DN"
            )
        if len(self._columns) > 256:
            self._columns.clear()
            self._tx_log_maps.clear()
        fast = table == TX_LOG_B and tx_log_layout(columns)
        cached = self._columns[key] = (columns, fast, table)
        return cached

    def _generic_rows(self, rows, code, columns, table, out: Classified, fde) -> None:
        """Private rows through the generic row decoder (markers, and what the fast reader
        declines)."""
        ev = RowsEvent.parse(body_view(rows, fde), fde, code)
        names = [c.name.decode() for c in columns]  # type: ignore[union-attr]
        images = ev.decode_rows(columns)
        records, markers = list(out.records), list(out.markers)
        for image in images:
            row = image[1] if code in UPDATE_TYPES else image
            values = dict(zip(names, row, strict=True))
            if table == TX_LOG_B:
                records.append(
                    CommitRecord(
                        int(values["txn_id"]),
                        int(values["commit_tso"]),
                        tuple(int(x) for x in _text(values["participants"]).split(",") if x),
                        bool(values["aborted"]),
                    )
                )
            else:
                markers.append(
                    {k: _text(v) if isinstance(v, bytes) else v for k, v in values.items()}
                )
        out.records, out.markers = records, markers


# The commit record's row as `cdc/cn_protocol/schema.py` defines it: every column NOT NULL, in this order.
TX_LOG_COLUMNS = (
    (b"txn_id", ColumnType.LONGLONG),
    (b"commit_tso", ColumnType.LONGLONG),
    (b"participants", ColumnType.VARCHAR),
    (b"aborted", ColumnType.TINY),
)


def tx_log_layout(columns: list[Column]) -> bool:
    """Whether a TABLE_MAP of __cdc_tx_log__ has the layout `fast_commit_records` reads."""
    return (
        len(columns) == len(TX_LOG_COLUMNS)
        and all(
            c.name == name and c.type == type_ and not c.nullable
            for c, (name, type_) in zip(columns, TX_LOG_COLUMNS, strict=True)
        )
        and columns[0].unsigned
        and columns[1].unsigned
        and columns[3].unsigned
        and columns[2].meta > 255  # VARCHAR(255) utf8mb4: a 2-byte length
    )


def fast_commit_records(rows: bytes, checksum_len) -> list[CommitRecord] | None:  # C: .pxd
    """The commit records of a v1 WRITE/UPDATE rows event on __cdc_tx_log__ (layout checked by
    `tx_log_layout`), read in place: the generic row decoder costs more than the rest of a
    commit-record group. None if anything is unexpected: the generic decoder then decides.
    Compiled (classifier.pxd), the fields are read from the bytes' buffer in C."""
    return commit_records_at(rows, 0, len(rows) - checksum_len)


def commit_records_at(rows: bytes, at, end) -> list[CommitRecord] | None:  # C: .pxd
    """`fast_commit_records` of the rows event at `rows[at:]`, `end` where its rows end (its
    CRC): a packed group's, read where it lies in the dump batch."""
    p = rows
    if end - at < 30:
        return None
    update = p[at + 4] == 24
    # 4 columns, all present (FULL row image), in the before (and after) image.
    if p[at + 27] != 4 or p[at + 28] != 0x0F or (update and p[at + 29] != 0x0F):
        return None
    pos = at + 30 if update else at + 29
    out: list[CommitRecord] = []
    while pos < end:
        if update:  # the before image: same layout, skipped
            if pos + 19 > end or p[pos] & 0x0F:
                return None
            pos += 19 + (p[pos + 17] | p[pos + 18] << 8) + 1
        # null bitmap, txn_id u64, commit_tso u64, participants (u16 length + text), aborted u8
        if pos + 19 > end or p[pos] & 0x0F:
            return None
        txn = tso = 0
        for k in range(8, 0, -1):
            txn = txn << 8 | p[pos + k]
            tso = tso << 8 | p[pos + 8 + k]
        length = p[pos + 17] | p[pos + 18] << 8
        pos += 19
        stop = pos + length
        if stop + 1 > end:
            return None
        # "1,2,3" read digit by digit; anything else (spaces, signs...) as int() reads it
        parts: list[int] = []
        value = digits = 0
        for k in range(pos, stop + 1):
            c = p[k] if k < stop else 44  # a "," closes the last one
            if c == 44:
                if digits:
                    parts.append(value)
                value = digits = 0
            elif 48 <= c <= 57 and digits < 18:
                value = value * 10 + (c - 48)
                digits += 1
            else:
                try:
                    parts = [int(x) for x in rows[pos:stop].split(b",") if x]
                except ValueError:
                    return None
                break
        out.append(named_tuple.new4(CommitRecord, txn, tso, tuple(parts), p[stop] != 0))
        pos = stop + 1
    return out if pos == end else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
