"""The merged order split per stream (`[dumper] streams = N`; docs/streams.md).

Pure logic, after MergeJoint and before the stream writers: each stream gets, in the merged
(commit-TSO) order, the part of each transaction that touches its tables, with the
transaction's own key, so its CTS mark carries the same TSO in every stream and a consumer of
several streams can align them. A statement that touches tables of two streams (a multi-table
UPDATE, a cascade) is split by event: a stream gets the TABLE_MAPs of its tables and the rows
events on them, the last one flagged as the statement's end. A DDL goes to its table's stream;
a database-level DDL (no table) to every stream under `stream_by = "table"`, to the database's
under `"database"`. Markers that are not written (CdcStart, StorageChange, …) go nowhere;
FlushLogs is the caller's (every stream rotates).

A statement spilled to disk (a huge transaction) stays there when its tables are one stream's:
only its leading TABLE_MAPs are read to route it, and the stream's writer streams it from its
spill file as the single stream does. One spilled statement over tables of several streams (a
huge multi-table UPDATE) is split in memory.
"""

from __future__ import annotations

from collections.abc import Iterable

from cdc.binlog import constants, header
from cdc.binlog.constants import HEADER_LEN, EventType, RowsFlag
from cdc.streams import StreamRouter
from merge_joint import Transaction
from merge_source import FragmentKind, Statement, table_name

_TID = slice(constants.TABLE_ID_OFFSET, constants.TABLE_ID_OFFSET + constants.TABLE_ID_LEN)
_FLAGS_AT = HEADER_LEN + constants.TABLE_ID_LEN  # a rows event's flags, after its table id
_DATA, _LOCAL, _DDL = FragmentKind.DATA, FragmentKind.LOCAL, FragmentKind.DDL


def _is_rows(code: int) -> bool:
    return (
        EventType.WRITE_ROWS_V1 <= code <= EventType.DELETE_ROWS_V1
        or EventType.WRITE_ROWS <= code <= EventType.DELETE_ROWS
    )


class StreamSplitter:
    """Splits batches of merged transactions into one list per stream."""

    __slots__ = ("router", "streams", "_names")

    def __init__(self, router: StreamRouter):
        self.router = router
        self.streams = router.streams
        # A TABLE_MAP's `db_len db 0 tbl_len tbl` bytes → its stream (`_whole`)
        self._names: dict[bytes, int] = {}

    def split(self, ready: list[Transaction]) -> list[list[Transaction]]:
        """Per stream, its parts of `ready`, in `ready`'s order (empty lists included)."""
        out: list[list[Transaction]] = [[] for _ in range(self.streams)]
        names, stream_of = self._names, self.router.stream_of
        for txn in ready:
            kind = txn.kind
            if kind is _DATA or kind is _LOCAL:
                stream = _whole(txn.statements, names, stream_of)
                if stream >= 0:  # the common case: the transaction whole, as it is
                    out[stream].append(txn)
                    continue
                for stream, statements in self._split_rows(txn).items():
                    out[stream].append(_part(txn, statements))
            elif kind is _DDL:
                marker = next(iter(txn.fragments[0].markers), None)
                if marker is None:
                    continue
                for stream in self.router.streams_of_ddl(marker["db"], marker.get("tbl") or ""):
                    out[stream].append(txn)
        return out

    def _split_rows(self, txn: Transaction) -> dict[int, list[Statement]]:
        """Stream → its statements of `txn` (a statement whole where it touches one stream)."""
        parts: dict[int, list[Statement]] = {}
        stream_of = self.router.stream_of
        for st in txn.statements:
            # (a spilled statement: its first events read from the spill file, the rest not)
            in_memory = st.span is None and st.packed is None  # (packed: as it crossed the pipe)
            stream = self._one_stream(st.in_memory if in_memory else st.iter_events())
            if stream is not None:  # the common case: whole, no copy, no look at its rows
                parts.setdefault(stream, []).append(st)
                continue
            events = st.in_memory if in_memory else st.events
            by_tid: dict[bytes, int] = {}  # the statement's DN table ids → their stream
            per: dict[int, list[bytes]] = {}
            for e in events:
                code = e[header.OFF_TYPE]
                if code == EventType.TABLE_MAP:
                    stream = by_tid[bytes(e[_TID])] = stream_of(*table_name(e))
                elif _is_rows(code):
                    stream = by_tid.get(bytes(e[_TID]), 0)  # (orphan rows: the encoder names it)
                else:
                    continue
                per.setdefault(stream, []).append(e)
            if len(per) == 1 and st.span is None:
                ((stream, _),) = per.items()
                parts.setdefault(stream, []).append(st)  # the common case: no copy
                continue
            for stream, evs in per.items():
                parts.setdefault(stream, []).append(Statement(st.trace_id, _end_statement(evs)))
        return parts

    def _one_stream(self, events: Iterable[bytes]) -> int | None:
        """The stream of a statement whose tables are all in one (None: split it). A
        statement's TABLE_MAPs come before its rows events, so its leading TABLE_MAPs name
        every table its rows touch."""
        stream = None
        stream_of = self.router.stream_of
        for e in events:
            if e[header.OFF_TYPE] != EventType.TABLE_MAP:
                break
            s = stream_of(*table_name(e))
            if stream is not None and s != stream:
                return None
            stream = s
        return stream


def _whole(statements: list, names: dict, stream_of) -> int:  # C types: stream_split.pxd
    """The one stream of every statement of a transaction (in memory or packed, each led by its
    TABLE_MAPs), or -1: `_split_rows` looks closer. One pass over the leading TABLE_MAPs, each
    routed by the name bytes it carries (`names`: a dict hit; `stream_of` fills it), no list or
    dict made: what the merge pays per transaction here must stay small beside MergeJoint's,
    at any stream count (compiled: a C loop)."""
    stream = -1
    for st in statements:
        if st.span is not None:
            return -1
        if st.packed is not None:  # as it crossed the pipe: the events one after another
            s = _packed_stream(st.packed, names, stream_of)
        else:
            s = _listed_stream(st.in_memory, names, stream_of)
        if s < 0 or (stream >= 0 and s != stream):
            return -1  # no TABLE_MAP leads it (orphan rows, or no event), or several streams
        stream = s
    return stream


def _packed_stream(data: bytes, names: dict, stream_of) -> int:  # C types: stream_split.pxd
    """The one stream of a packed statement's leading TABLE_MAPs; -1: none, or several."""
    stream = -1
    at = 0
    n = len(data)
    p = data  # C: its bytes, read in place
    while at + HEADER_LEN <= n and p[at + header.OFF_TYPE] == constants.EventType.TABLE_MAP:
        s = _map_stream(data, at, names, stream_of)
        if stream >= 0 and s != stream:
            return -1
        stream = s
        at += header.event_size(p, at)
    return stream


def _listed_stream(events: list, names: dict, stream_of) -> int:  # C types: stream_split.pxd
    """`_packed_stream` of a statement whose events are a list."""
    stream = -1
    for e in events:
        if e[header.OFF_TYPE] != constants.EventType.TABLE_MAP:
            break
        s = _map_stream(e, 0, names, stream_of)
        if stream >= 0 and s != stream:
            return -1
        stream = s
    return stream


def _map_stream(data: bytes, at, names: dict, stream_of) -> int:  # C: stream_split.pxd
    """The stream of the TABLE_MAP at `data[at:]`, by its `db_len db 0 tbl_len tbl` bytes."""
    p = data  # C: its bytes, read in place
    name_at = at + constants.TABLE_MAP_DB_LEN_OFFSET
    end = name_at + 3 + p[name_at]
    key = data[name_at : end + p[end - 1]]
    got = names.get(key)
    if got is None:
        event = data[at : at + header.event_size(p, at)] if at else data
        got = names[key] = stream_of(*table_name(event))
    return got


def _part(txn: Transaction, statements: list[Statement]) -> Transaction:
    if (
        statements is txn.statements
        or len(statements) == len(txn.statements)
        and all(a is b for a, b in zip(statements, txn.statements, strict=True))
    ):
        return txn
    return Transaction(txn.key, txn.txn_id, txn.kind, txn.fragments, statements)


def _end_statement(events: list[bytes]) -> list[bytes]:
    """`events` (a stream's part of a split statement) with its last rows event flagged as the
    statement's end, as a replica expects before it releases the statement's tables."""
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        if _is_rows(e[header.OFF_TYPE]):
            flags = int.from_bytes(e[_FLAGS_AT : _FLAGS_AT + 2], "little")
            if not flags & RowsFlag.STMT_END:
                patched = bytearray(e)
                patched[_FLAGS_AT : _FLAGS_AT + 2] = (flags | RowsFlag.STMT_END).to_bytes(
                    2, "little"
                )
                events = [*events[:i], bytes(patched), *events[i + 1 :]]
            break
    return events
