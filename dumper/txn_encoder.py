"""Logical transaction → the events of the global binlog (MySQL 5.7 flavour).

Per transaction: `Query BEGIN`, then each statement's TABLE_MAP(s) (table id renumbered) and
rows events (MariaDB v1 turned into MySQL v2, same table id), `XID`, and the `CTS::<tso>` mark
that makes the commit TSO recoverable from the file. A DDL marker becomes one Query event and
its mark. Row images are never decoded: events are patched byte-wise (`cdc.binlog.fastpath`).
log_pos and CRC are left to the writer, which stamps each event once when it lands.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from cdc.binlog.constants import EventType
from cdc.binlog.events import XidEvent, cts_mark, encode_event
from cdc.binlog.fastpath import rewrite
from cdc.binlog.query import QueryEvent
from dumper.table_id_map import TableIdMap
from merge_joint.merger import Transaction
from merge_source.classifier import table_name
from merge_source.fragment import FragmentKind
from merge_source.sorter import Kind

TABLE_MAP = int(EventType.TABLE_MAP)
CREATE_TABLE = re.compile(
    rb"\s*(/\*.*?\*/\s*)*CREATE\s+(TEMPORARY\s+)?TABLE\b", re.IGNORECASE | re.DOTALL
)
ROWS_TYPES = frozenset({23, 24, 25, 30, 31, 32})


class EncodeError(RuntimeError):
    """A transaction that cannot be written (e.g. rows without their TABLE_MAP)."""


def cts_suffix(txn: Transaction) -> bytes:
    """Local (non-CN) transactions share a TSO: the mark carries their full sort key."""
    tso, kind, dn, seq = txn.key
    return b"" if kind == Kind.BRANCH else f"L{dn}.{seq}".encode()


class TransactionEncoder:
    def __init__(self, server_id: int, table_ids: TableIdMap | None = None):
        self.server_id = server_id
        self.table_ids = table_ids or TableIdMap()
        self._xid = 0
        self._begin = QueryEvent(b"BEGIN")

    def _event(self, body: object, timestamp: int) -> bytes:
        return encode_event(body, timestamp=timestamp, server_id=self.server_id)

    def encode(self, txn: Transaction) -> list[bytes] | None:
        """The events of `txn`, or None if it has nothing to write (e.g. only dropped rows)."""
        events = self.iter_encode(txn)
        return None if events is None else list(events)

    def iter_encode(self, txn: Transaction) -> Iterator[bytes] | None:
        """Like `encode`, one event at a time: a spilled (huge) transaction streams from its
        spill files through here to the writer without being held in memory."""
        timestamp = max(f.timestamp for f in txn.fragments)
        if txn.kind is FragmentKind.DDL:
            ddl = self._ddl(txn, timestamp)
            return None if ddl is None else iter(ddl)
        if txn.kind is not FragmentKind.DATA and txn.kind is not FragmentKind.LOCAL:
            return None  # instruction markers are not written (FlushLogs is handled by the caller)
        if not any(st.count for st in txn.statements):
            return None
        return self._rows(txn, timestamp)

    def _rows(self, txn: Transaction, timestamp: int) -> Iterator[bytes]:
        sid = self.server_id
        yield self._event(self._begin, timestamp)
        for st in txn.statements:
            ids: dict[bytes, int] = {}  # DN table id (6 raw bytes) -> logical id
            for e in st.iter_events():
                code = e[4]
                if code == TABLE_MAP:
                    tid = self.table_ids.id_for(*table_name(e))
                    ids[e[19:25]] = tid
                    yield bytes(rewrite(e, table_id=tid, server_id=sid, timestamp=timestamp))
                elif code in ROWS_TYPES:
                    tid = ids.get(e[19:25])
                    if tid is None:
                        raise EncodeError(
                            f"txn {txn.txn_id} at TSO {txn.tso}: rows event without its TABLE_MAP"
                        )
                    yield bytes(rewrite(e, table_id=tid, server_id=sid, timestamp=timestamp))
        self._xid += 1
        yield self._event(XidEvent(self._xid), timestamp)
        yield self._event(cts_mark(txn.tso, cts_suffix(txn)), timestamp)

    def _ddl(self, txn: Transaction, timestamp: int) -> list[bytes] | None:
        marker = next(iter(txn.fragments[0].markers), None)
        if marker is None:
            return None
        db, table = marker["db"].encode(), marker["tbl"].encode()
        self.table_ids.bump(db, table)
        ddl = marker["ddl"].encode()
        out = []
        if CREATE_TABLE.match(ddl):
            # The CN creates logical databases implicitly; consumers need them explicitly.
            create_db = b"CREATE DATABASE IF NOT EXISTS `" + db.replace(b"`", b"``") + b"`"
            out.append(self._event(QueryEvent(create_db, db=b""), timestamp))
        out.append(self._event(QueryEvent(ddl, db=db), timestamp))
        out.append(self._event(cts_mark(txn.tso), timestamp))
        return out
