"""Logical transaction → the events of the global binlog (MySQL 5.7 or MariaDB 10.11 flavour).

Per transaction: a GTID event (its sid, gno and logical clock left as zeros: the writer
numbers transactions as they land, `binlog_writer.gtids`), `Query BEGIN` (the mariadb flavour:
a MariaDB GTID event, its seq_no and domain left as zeros, which replaces BEGIN as in MariaDB's
own files), then each statement's TABLE_MAP(s) (table id renumbered) and
rows events (MariaDB v1 turned into MySQL v2, same table id), `XID`, and the `CTS::<tso>` mark
that makes the commit TSO recoverable from the file (a ROWS_QUERY event; the mariadb flavour:
a BINLOG_CHECKPOINT, which a MariaDB replica takes as outside any GTID group). A DDL marker becomes one Query event and
its mark (a GTID before each Query; MariaDB's flagged standalone DDL). Row images are never decoded: events are patched byte-wise. log_pos and CRC are
left to the writer, which stamps each event once when it lands.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator

from cdc.binlog import constants, header, splice
from cdc.binlog.constants import CHECKSUM_LEN, HEADER_LEN, ROWS_V2_NO_EXTRA, EventType
from cdc.binlog.events import (
    CHECKPOINT_MARK,
    CTS_PREFIX,
    ROWS_QUERY_MARK,
    MariadbGtidEvent,
    MysqlGtidEvent,
    XidEvent,
    cts_mark,
    encode_event,
)
from cdc.binlog.gtid import GTID_COMMIT_FLAG, LT_TYPE_LOGICAL
from cdc.binlog.mariadb_gtid import FLAGS2_DDL, FLAGS2_TRANSACTION, MARIADB_GTID_BODY_LEN
from cdc.binlog.query import QueryEvent
from cdc.compiled import is_compiled
from cdc.keys import Kind
from dumper.pipeline.table_id_map import TableIdMap
from merge_joint import Transaction
from merge_source import FragmentKind, table_name

CREATE_TABLE = re.compile(
    rb"\s*(/\*.*?\*/\s*)*CREATE\s+(TEMPORARY\s+)?TABLE\b", re.IGNORECASE | re.DOTALL
)
NO_CRC = bytes(CHECKSUM_LEN)  # a CRC slot the writer fills
_TS = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_TID_END = constants.TABLE_ID_OFFSET + constants.TABLE_ID_LEN  # a TABLE_MAP's content from here
_NO_TABLE = 1 << 48  # no 6-byte table id is this
_XID_TAIL = bytes(8 + CHECKSUM_LEN)  # an XID event's value and CRC slot, patched in place
_LOCAL_AT = b"::L"  # a local transaction's mark: CTS::<tso>::L<dn>.<seq>
_MARK_TAIL = struct.Struct("<IIH")  # the mark's header from event size on: size, log_pos, flags
# Enum members as module constants: an `Enum` class attribute lookup costs more than the
# byte patching of an event (the interpreted metaclass), once per transaction or more.
_BRANCH = int(Kind.BRANCH)
_DATA, _LOCAL, _DDL = FragmentKind.DATA, FragmentKind.LOCAL, FragmentKind.DDL
_INSTRUCTION = FragmentKind.INSTRUCTION
# A MariaDB GTID event's header flags as MariaDB writes them (LOG_EVENT_SUPPRESS_USE_F).
_SUPPRESS_USE = 0x08


class OrphanRows(RuntimeError):
    """A rows event whose TABLE_MAP is not before it in its statement (the encoder names the
    transaction: `EncodeError`)."""


class EventPatcher:
    """Patches DN TABLE_MAP and rows events into the global binlog: the header's timestamp,
    type, server_id and size, the logical table id (by the TABLE_MAP's content), rows v1 → v2.
    The leader's hot loop: compiled, a cdef class (txn_encoder.pxd), `put_event` a C call per
    event, the header written by the codec's writers (`cdc.binlog.header`) into the
    bytearray's buffer."""

    __slots__ = ("server_id", "table_ids", "by_content", "last_content", "last_tid")

    def __init__(self, server_id: int, table_ids: TableIdMap):
        self.server_id = server_id
        self.table_ids = table_ids
        # TABLE_MAP content (names + columns, DN table id excluded) -> 6-byte logical id.
        # Cleared when a DDL bumps a table's id (`forget`).
        self.by_content: dict[bytes, bytes] = {}
        self.last_content: bytes | None = None  # the last TABLE_MAP content looked up
        self.last_tid: bytes | None = None  # and its id

    def table_id(self, table_map: bytes) -> bytes:
        """The logical table id (6 bytes) for a TABLE_MAP event, cached by its content."""
        return self.table_id_at(table_map, 0, len(table_map))

    def table_id_at(self, buf: bytes, pos, n) -> bytes:
        """`table_id` of the TABLE_MAP event `buf[pos:pos + n]` (the event itself is sliced
        out only for a content not seen before)."""
        start = pos + _TID_END
        size = n - _TID_END - CHECKSUM_LEN
        # The last content looked up, compared in place: a catch-up's statements mostly map
        # the table of the one before (no slice, no hash of it).
        last = self.last_content
        if last is not None and splice.same(buf, start, size, last):
            return self.last_tid
        content = buf[start : start + size]
        tid = self.by_content.get(content)
        if tid is None:
            number = self.table_ids.id_for(*table_name(buf[pos : pos + n]))
            tid = number.to_bytes(constants.TABLE_ID_LEN, "little")
            self.by_content[content] = tid
        self.last_content, self.last_tid = content, tid
        return tid

    def forget(self) -> None:
        """A table's id changed (a DDL): its next TABLE_MAP asks `table_ids` again."""
        self.by_content.clear()
        self.last_content = self.last_tid = None

    def encode_rows(self, out: bytearray, statements, timestamp) -> int:
        """Every TABLE_MAP and rows event of `statements` appended to `out` by `put_event`.
        Returns how many."""
        n = 0
        for st in statements:
            if st.packed is not None:  # as it crossed the pipe (the leader's common case)
                n += self.put_packed(out, st.packed, timestamp)
                continue
            ids: dict = {}  # DN table id (6 raw bytes) -> logical id (6 bytes), per statement
            for e in st.in_memory if st.span is None else st.iter_events():
                n += self.put_event(out, e, ids, timestamp)
        return n

    def put_packed(self, out: bytearray, packed: bytes, timestamp) -> int:
        """`put_event` of every event of a packed statement (`Statement.packed`), each read
        where it lies and copied once, straight into `out`: no bytes object per event. The
        wire's decode checked the sizes. Returns how many were appended. (Typed in
        txn_encoder.pxd.)"""
        # DN table id (an int) -> logical id (6 bytes), per statement: made at its second
        # TABLE_MAP (most statements map one table, `last_dn` holds it)
        ids = None
        last_dn = _NO_TABLE  # the last one looked up: a rows event follows its TABLE_MAP
        last_tid = b""
        count = 0
        pos = 0
        stop = len(packed)
        p = packed  # C: the bytes' buffer
        while pos < stop:
            n = header.event_size(p, pos)
            code = p[pos + header.OFF_TYPE]
            v1 = constants.EventType.WRITE_ROWS_V1 <= code <= constants.EventType.DELETE_ROWS_V1
            if code == constants.EventType.TABLE_MAP:
                dn_tid = header.table_id(p, pos)
                tid = self.table_id_at(packed, pos, n)
                if ids is None and last_dn != _NO_TABLE:
                    ids = {last_dn: last_tid}
                if ids is not None:
                    ids[dn_tid] = tid
                last_dn, last_tid = dn_tid, tid
            elif v1 or constants.EventType.WRITE_ROWS <= code <= constants.EventType.DELETE_ROWS:
                dn_tid = header.table_id(p, pos)
                if dn_tid == last_dn:
                    tid = last_tid
                else:
                    tid = None if ids is None else ids.get(dn_tid)
                    if tid is None:
                        raise OrphanRows()
                    last_dn, last_tid = dn_tid, tid
            else:
                pos += n
                continue
            if v1:  # rows v1 → v2: MySQL v2's extra-data length, after the flags
                extra = constants.ROWS_EXTRA_OFFSET
                at = splice.append_gap(out, p, pos, n, extra, ROWS_V2_NO_EXTRA)
                code += constants.ROWS_V1_TO_V2_STEP
            else:
                at = splice.append(out, p, pos, n)
            q = out  # C: the bytearray's buffer, taken after it grew
            header.write_head(q, at, timestamp, code, self.server_id, len(out) - at)
            header.write_table_id(q, at, tid)
            count += 1
            pos += n
        return count

    def put_event(self, out: bytearray, e, ids, timestamp) -> int:
        """Append DN event `e` patched for the global binlog, if it is a TABLE_MAP or rows
        event; `ids`: the statement's DN table ids → logical ids so far. Returns 1 if
        appended, 0 if skipped. (Arguments typed in txn_encoder.pxd.)"""
        p = e  # C: the event's bytes
        code = p[header.OFF_TYPE]
        dn_tid = e[constants.TABLE_ID_OFFSET : constants.TABLE_ID_OFFSET + constants.TABLE_ID_LEN]
        if code == constants.EventType.TABLE_MAP:
            tid = ids[dn_tid] = self.table_id(e)
        elif (
            constants.EventType.WRITE_ROWS_V1 <= code <= constants.EventType.DELETE_ROWS_V1
            or constants.EventType.WRITE_ROWS <= code <= constants.EventType.DELETE_ROWS
        ):
            tid = ids.get(dn_tid)
            if tid is None:
                raise OrphanRows()
        else:
            return 0
        at = len(out)
        out += e
        if constants.EventType.WRITE_ROWS_V1 <= code <= constants.EventType.DELETE_ROWS_V1:
            # rows v1 → v2: MySQL v2's extra-data length, after the flags
            extra = at + constants.ROWS_EXTRA_OFFSET
            out[extra:extra] = ROWS_V2_NO_EXTRA
            code += constants.ROWS_V1_TO_V2_STEP
        q = out  # C: the bytearray's buffer, taken after it grew
        header.write_head(q, at, timestamp, code, self.server_id, len(out) - at)
        header.write_table_id(q, at, tid)
        return 1


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py


class EncodeError(RuntimeError):
    """A transaction that cannot be written (e.g. rows without their TABLE_MAP)."""


def _timestamp(txn) -> int:  # C types: txn_encoder.pxd
    """The transaction's event timestamp: its latest DN commit time."""
    fragments = txn.fragments
    latest = fragments[0].timestamp
    for f in fragments:
        if f.timestamp > latest:
            latest = f.timestamp
    return latest


def has_events(statements) -> bool:  # C types: txn_encoder.pxd
    """Whether any statement holds an event (`any(st.count ...)` without a generator and a
    property call per statement: once per transaction on the leader's path)."""
    for st in statements:
        if st.span is not None:
            if st.span.count:
                return True
        elif st.packed is not None:
            if st.packed:
                return True
        elif st.in_memory:
            return True
    return False


def first_spilled(txns, start):  # C types: txn_encoder.pxd
    """The index of the first transaction from `start` on with a spilled statement, or
    len(txns): the run `encode_run` may encode at once."""
    n = len(txns)
    for i in range(start, n):
        txn = txns[i]
        if has_spilled(txn.statements):
            return i
    return n


def has_spilled(statements) -> bool:  # C types: txn_encoder.pxd
    """Whether any statement lives in a spill file (`Fragment.spilled` over a transaction's
    statements without a generator: once per transaction on the leader's path)."""
    for st in statements:
        if st.span is not None:
            return True
    return False


class TransactionEncoder:
    """Encodes transactions for one writer (its XID counter and table ids are stream state).
    Compiled, a cdef class (txn_encoder.pxd): its fields are C struct reads, its per
    transaction helpers C calls.

    Per event of a data transaction the work is: one copy of the DN bytes into a bytearray,
    one header pack (timestamp, type, server_id, size), the 6-byte table id slice and, for a
    MariaDB rows v1 event, a 2-byte insertion (v1 → v2). The CRC is not computed here: the
    writer stamps log_pos and the CRC of every event once, where it lands
    (`fastpath.stamp_positions`). BEGIN, XID and the CTS mark are built from pre-encoded
    templates.
    """

    __slots__ = (
        "server_id",
        "gtids",
        "flavor",
        "mark",
        "table_ids",
        "patcher",
        "_xid",
        "_begin_tail",
        "_gtid_tail",
        "_ddl_gtid_tail",
        "_xid_head",
        "_mark_head",
        "_mark_prefixes",
    )

    def __init__(
        self,
        server_id: int,
        table_ids: TableIdMap | None = None,
        *,
        gtids: bool = False,
        flavor: str = "mysql",
    ):
        """`gtids`: each transaction starts with a GTID event, for a writer that numbers them
        (`BinlogWriter(gtids=…)`); the two go together. `flavor` "mariadb": MariaDB GTID
        events (which replace BEGIN, so it needs `gtids`) and the CTS mark in a
        BINLOG_CHECKPOINT event (`CHECKPOINT_MARK`) instead of a ROWS_QUERY."""
        if flavor == "mariadb" and not gtids:
            raise ValueError("the mariadb flavour's transactions begin with their GTID event")
        self.server_id = server_id
        self.gtids = gtids
        self.flavor = flavor
        self.mark = CHECKPOINT_MARK if flavor == "mariadb" else ROWS_QUERY_MARK
        self.table_ids = table_ids or TableIdMap()
        self.patcher = EventPatcher(server_id, self.table_ids)
        self._xid = 0
        # Templates without their leading timestamp (and, for XID, its value and CRC).
        if flavor == "mariadb":
            self._begin_tail = b""  # the GTID event begins the transaction
            self._gtid_tail = self._mariadb_gtid(FLAGS2_TRANSACTION)
            self._ddl_gtid_tail = self._mariadb_gtid(FLAGS2_DDL)
        else:
            self._begin_tail = self._event(QueryEvent(b"BEGIN"), 0)[4:]
            gtid = MysqlGtidEvent(EventType.GTID, GTID_COMMIT_FLAG, bytes(16), 0, LT_TYPE_LOGICAL)
            self._gtid_tail = self._ddl_gtid_tail = self._event(gtid, 0)[4:-CHECKSUM_LEN] + NO_CRC
        xid = self._event(XidEvent(0), 0)
        self._xid_head = xid[4:HEADER_LEN]
        self._mark_head = bytes((self.mark.type_code,)) + _U32.pack(server_id)  # type, server_id
        # The mark's bytes between its timestamp and its text, by the text's length: they
        # depend on nothing else (made once per length: a call of the carrier's interpreted
        # `length_field` and three field reads cost more than the rest of the mark).
        self._mark_prefixes: dict[int, bytes] = {}

    def _event(self, body: object, timestamp: int) -> bytes:
        return encode_event(body, timestamp=timestamp, server_id=self.server_id)

    def _mariadb_gtid(self, flags2: int) -> bytes:
        """A MariaDB GTID event without its timestamp: seq_no and domain zero (the writer's
        layout stamps them), flags2, zero padding to 19 bytes as a 10.11 master writes it."""
        gtid = MariadbGtidEvent(0, 0, flags2, trailer=bytes(MARIADB_GTID_BODY_LEN - 13))
        raw = encode_event(gtid, timestamp=0, server_id=self.server_id, flags=_SUPPRESS_USE)
        return raw[4:-CHECKSUM_LEN] + NO_CRC

    def encode(self, txn: Transaction) -> list[bytes | bytearray] | None:
        """The events of `txn`, or None if it has nothing to write (e.g. only dropped rows).
        log_pos and CRC of the events are left for the writer to stamp."""
        events = self.iter_encode(txn)
        return None if events is None else list(events)

    def iter_encode(self, txn: Transaction) -> Iterator[bytes | bytearray] | None:
        """Like `encode`, one event at a time: a spilled (huge) transaction streams from its
        spill files through here to the writer without being held in memory."""
        timestamp = _timestamp(txn)
        kind = txn.kind
        if kind is _DDL:
            ddl = self._ddl(txn, timestamp)
            return None if ddl is None else iter(ddl)
        if kind is not _DATA and kind is not _LOCAL:
            return None  # instruction markers are not written (FlushLogs is handled by the caller)
        if not has_events(txn.statements):
            return None
        return self._rows(txn, timestamp)

    def encode_into(self, txn: Transaction, out: bytearray, gtid_at: list | None = None) -> int:
        """`encode`, appended to `out` as one buffer: no object per event and no join
        afterwards (the leader's path). Returns the number of events, 0 if nothing to write.
        The offsets in `out` of the GTID events written are appended to `gtid_at`, for the
        writer that numbers them."""
        kind = txn.kind
        if kind is not _DATA and kind is not _LOCAL:
            events = self.iter_encode(txn)  # DDL and markers: rare
            if events is None:
                return 0
            n = 0
            for e in events:
                code = e[header.OFF_TYPE]
                if gtid_at is not None and (
                    code == constants.EventType.GTID or code == constants.EventType.MARIADB_GTID
                ):
                    gtid_at.append(len(out))
                out += e
                n += 1
            return n
        statements = txn.statements
        if not has_events(statements):
            return 0
        timestamp = _timestamp(txn)
        ts = _TS.pack(timestamp)
        n = 2
        if self.gtids:
            if gtid_at is not None:
                gtid_at.append(len(out))
            splice.extend(out, ts)
            splice.extend(out, self._gtid_tail)
            n = 3
        if self._begin_tail:
            splice.extend(out, ts)
            splice.extend(out, self._begin_tail)
            n += 1
        patcher: EventPatcher = self.patcher  # compiled: encode_rows a C call
        try:
            n += patcher.encode_rows(out, statements, timestamp)
        except OrphanRows:
            raise self._orphan(txn) from None
        self._xid_into(out, ts)
        self._mark_into(out, txn.key, ts)
        return n

    def encode_run(self, txns, start, stop, out, ends, tsos, gtid_at) -> int:  # C types: .pxd
        """`EncodedBatch.add` of txns[start:stop] in one compiled loop (the leader's write loop
        paid ~4 K instructions of Python per transaction around `encode_into`): each appended
        to `out`, and if it had events its end to `ends` and its TSO to `tsos`; INSTRUCTION
        transactions (nothing to write) are skipped, spilled ones are the caller's (see
        `first_spilled`). Returns the events appended."""
        events = 0
        for i in range(start, stop):
            txn = txns[i]
            if txn.kind is _INSTRUCTION:
                continue
            count = self.encode_into(txn, out, gtid_at)
            if count:
                ends.append(len(out))
                tso, _kind, _dn, _seq = txn.key  # unpacked: a NamedTuple's k[0] is a method call
                tsos.append(tso)
                events += count
        return events

    def _rows(self, txn: Transaction, timestamp: int) -> Iterator[bytes | bytearray]:
        if self.gtids:
            yield _TS.pack(timestamp) + self._gtid_tail
        if self._begin_tail:
            yield _TS.pack(timestamp) + self._begin_tail
        put = self.patcher.put_event
        for st in txn.statements:
            ids: dict[bytes, bytes] = {}
            for e in st.iter_events():
                b = bytearray()
                try:
                    appended = put(b, e, ids, timestamp)
                except OrphanRows:
                    raise self._orphan(txn) from None
                if appended:
                    yield b
        yield self._xid_event(timestamp)
        yield self._mark(txn, timestamp)

    def _xid_event(self, timestamp: int) -> bytes:
        out = bytearray()
        self._xid_into(out, _TS.pack(timestamp))
        return bytes(out)

    def _mark(self, txn: Transaction, timestamp: int) -> bytes:
        out = bytearray()
        self._mark_into(out, txn.key, _TS.pack(timestamp))
        return bytes(out)

    # Appended piece by piece (`splice.extend`: a resize and a copy in C), the numbers
    # written in place: a bytes concatenation or formatting per field cost more than the event.
    def _xid_into(self, out: bytearray, ts: bytes) -> None:
        self._xid += 1
        splice.extend(out, ts)
        splice.extend(out, self._xid_head)
        at = splice.extend(out, _XID_TAIL)
        q = out  # C: the bytearray's buffer, taken after it grew
        splice.write_u64(q, at, self._xid)

    def _mark_into(self, out: bytearray, key, ts: bytes) -> None:
        """The CTS mark of the transaction of global key `key`: `CTS::<tso>`, and for a local
        transaction (they share a TSO) `::L<dn>.<seq>` too (`cts_text`, written in place)."""
        # Unpacked, not indexed: a NamedTuple's item lookup is tuple's generic slot (a method
        # call per index), its unpacking tuple's C iterator.
        tso, kind, key_dn, key_seq = key
        local = kind != _BRANCH
        n = len(CTS_PREFIX) + splice.decimal_len(tso)
        dn = seq = 0
        if local:
            dn = key_dn
            seq = key_seq
            n += len(_LOCAL_AT) + splice.decimal_len(dn) + 1 + splice.decimal_len(seq)
        prefix = self._mark_prefixes.get(n)
        if prefix is None:
            prefix = self._mark_prefixes[n] = self._mark_prefix(n)
        splice.extend(out, ts)
        splice.extend(out, prefix)
        splice.extend(out, CTS_PREFIX)
        splice.append_decimal(out, tso)
        if local:
            splice.extend(out, _LOCAL_AT)
            splice.append_decimal(out, dn)
            splice.extend(out, b".")
            splice.append_decimal(out, seq)
        splice.extend(out, NO_CRC)

    def _mark_prefix(self, text_len: int) -> bytes:
        """A mark's header from its type on, and its body before a text of `text_len` bytes."""
        carrier = self.mark
        return (
            self._mark_head
            + _MARK_TAIL.pack(carrier.text_at + text_len + CHECKSUM_LEN, 0, carrier.flags)
            + carrier.length_field(text_len)
        )

    @staticmethod
    def _orphan(txn: Transaction) -> EncodeError:
        return EncodeError(f"txn {txn.txn_id} at TSO {txn.tso}: rows event without its TABLE_MAP")

    def _ddl(self, txn: Transaction, timestamp: int) -> list[bytes] | None:
        marker = next(iter(txn.fragments[0].markers), None)
        if marker is None:
            return None
        db, table = marker["db"].encode(), marker["tbl"].encode()
        self.table_ids.bump(db, table)
        self.patcher.forget()  # its next TABLE_MAP gets the new id
        ddl = marker["ddl"].encode()
        out = []
        gtid = [_TS.pack(timestamp) + self._ddl_gtid_tail] if self.gtids else []
        if CREATE_TABLE.match(ddl):
            # The CN creates logical databases implicitly; consumers need them explicitly.
            # Two statements, two GTIDs (a replica applies each DDL as its own transaction),
            # one terminator: the writer's crash recovery keeps both or neither.
            create_db = b"CREATE DATABASE IF NOT EXISTS `" + db.replace(b"`", b"``") + b"`"
            out += gtid
            out.append(self._event(QueryEvent(create_db, db=b""), timestamp))
        out += gtid
        out.append(self._event(QueryEvent(ddl, db=db), timestamp))
        out.append(self._event(cts_mark(txn.tso, carrier=self.mark), timestamp))
        return out
