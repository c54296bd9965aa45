"""What a MergeSource emits: ordered fragments of transactions, and watermarks."""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

from cdc.keys import GlobalKey, SortKey, global_key
from merge_source.spill import EventSpan


class FragmentKind(Enum):
    DATA = "data"  # a CN transaction's branch on user tables
    LOCAL = "local"  # a non-CN transaction committed directly on the DN
    HEARTBEAT = "heartbeat"  # a CN heartbeat: nothing to emit, but it moves the watermark
    INSTRUCTION = "instruction"  # a marker in __cdc_instruction__ (CdcStart, StorageChange, ...)
    DDL = "ddl"  # a logical DDL marker in __cdc_ddl_record__


TraceId = tuple[int, int]
EVENT_SIZE_AT = 9  # an event's size: u32 at header offset 9


def split_joined(joined: bytes) -> list[bytes]:
    """The events concatenated in `joined` (a statement's `joined`), each cut by its size."""
    out, pos = [], 0
    while pos < len(joined):
        size = int.from_bytes(joined[pos + EVENT_SIZE_AT : pos + EVENT_SIZE_AT + 4], "little")
        if size < 19 or pos + size > len(joined):
            raise ValueError(f"event size {size} at {pos} overruns a joined statement")
        out.append(joined[pos : pos + size])
        pos += size
    return out


class Statement:
    """The row events of one SQL statement: TABLE_MAP(s) then rows, raw bytes as on the DN.

    `trace_id` comes from the statement's `/*CDC trace=<seq>.<subseq> ... */` hint (None for a
    statement without one); MergeJoint orders a transaction's statements by it.

    The events are in memory (`in_memory`, a list), or, for a transaction larger than the spill
    threshold, in a spill file (`span`, see `spill.py`; `in_memory` is then empty). `events`
    reads them either way (a spilled statement's back from disk on every access, as a new list
    nobody keeps, so callers that only want a few statements keep working); `iter_events()`
    streams them one by one and is the accessor for code that must handle huge transactions.
    The per-event loops read `in_memory` when `span` is None: the list itself, no call.

    A MergeSource process builds its statements a third way: `joined`, the events concatenated
    as the wire sends them (copied out of the dump batch in one compiled pass: no list and no
    bytes object per event; `in_memory` is then empty and `span` None). Only the worker's
    processor, renaming and wire encoder see those; `events` splits them for anyone else.

    Typed fields in fragment.pxd (compiled: a cdef class, its fields read in C by the
    compiled modules that cimport it).
    """

    __slots__ = ("trace_id", "in_memory", "span", "joined")

    def __init__(
        self,
        trace_id: TraceId | None,
        events: list[bytes] | None = None,
        span: EventSpan | None = None,
        joined: bytes | None = None,
    ):
        self.trace_id = trace_id
        self.in_memory: list[bytes] = [] if events is None else events
        self.span = span
        self.joined = joined

    @property
    def events(self) -> list[bytes]:
        if self.span is not None:
            return list(self.span)
        if self.joined is not None:
            return split_joined(self.joined)
        return self.in_memory

    @events.setter
    def events(self, events: list[bytes]) -> None:
        self.in_memory, self.span, self.joined = events, None, None

    @property
    def spilled(self) -> bool:
        return self.span is not None

    @property
    def count(self) -> int:
        """Number of events (without reading a spilled statement back)."""
        if self.joined is not None:
            return len(split_joined(self.joined))
        return self.span.count if self.span is not None else len(self.in_memory)

    @property
    def size(self) -> int:
        """Bytes of its events (without reading a spilled statement back)."""
        if self.joined is not None:
            return len(self.joined)
        return self.span.size if self.span is not None else sum(map(len, self.in_memory))

    def iter_events(self) -> Iterator[bytes]:
        if self.joined is not None:
            return iter(split_joined(self.joined))
        return iter(self.span if self.span is not None else self.in_memory)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Statement):
            return NotImplemented
        return self.trace_id == other.trace_id and self.events == other.events

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        where = f"spilled {self.span.size} bytes" if self.span is not None else self.events
        return f"Statement(trace_id={self.trace_id!r}, events={where!r})"


class Fragment:
    """One DN's part of a transaction (or a local transaction, a heartbeat, a marker), released
    in sort-key order. Typed fields in fragment.pxd (compiled: a cdef class)."""

    __slots__ = (
        "key",
        "dn",
        "txn_id",
        "participants",
        "kind",
        "statements",
        "markers",
        "timestamp",
    )

    def __init__(
        self,
        key: SortKey,
        dn: int,
        txn_id: int,  # 0 for a local transaction
        participants: tuple[int, ...],
        kind: FragmentKind,
        statements: list[Statement] | None = None,
        # Decoded marker rows (INSTRUCTION/DDL): column name -> value.
        markers: list[dict[str, Any]] | None = None,
        timestamp: int = 0,  # DN commit time (seconds), used as the event timestamp downstream
    ):
        self.key = key
        self.dn = dn
        self.txn_id = txn_id
        self.participants = participants
        self.kind = kind
        self.statements: list[Statement] = [] if statements is None else statements
        self.markers: list[dict[str, Any]] = [] if markers is None else markers
        self.timestamp = timestamp

    def _fields(self) -> tuple:
        return (
            self.key,
            self.dn,
            self.txn_id,
            self.participants,
            self.kind,
            self.statements,
            self.markers,
            self.timestamp,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not Fragment:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return (
            f"Fragment(key={self.key!r}, dn={self.dn!r}, txn_id={self.txn_id!r},"
            f" participants={self.participants!r}, kind={self.kind!r},"
            f" statements={self.statements!r}, markers={self.markers!r},"
            f" timestamp={self.timestamp!r})"
        )

    @property
    def tso(self) -> int:
        return self.key.tso

    @property
    def spilled(self) -> bool:
        """True if some statement's events live in a spill file (a huge transaction)."""
        return any(s.span is not None for s in self.statements)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.statements)

    def iter_events(self) -> Iterator[bytes]:
        """Every event of every statement, in order, streamed from disk if spilled."""
        for s in self.statements:
            yield from s.iter_events()

    @property
    def global_key(self) -> GlobalKey:
        return global_key(self.dn, self.key)


class Watermark:
    """No fragment with a key ≤ `key` will come from `dn` any more.

    `checkpoint` (a `cdc.keys.Checkpoint`) is where this DN's binlog must be re-read from once
    everything up to `lift(dn, key)` is durably in the global binlog.

    Typed fields in fragment.pxd (compiled: a cdef class; a frozen dataclass's `__init__`, one
    `object.__setattr__` per field, cost ~3x as much, once per wire record on the leader).
    Treat it as immutable.
    """

    __slots__ = ("dn", "key", "checkpoint")

    def __init__(self, dn: int, key: SortKey, checkpoint: Any = None):
        self.dn = dn
        self.key = key
        self.checkpoint = checkpoint

    def _fields(self) -> tuple[int, SortKey, Any]:
        return (self.dn, self.key, self.checkpoint)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Watermark:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Watermark(dn={self.dn!r}, key={self.key!r}, checkpoint={self.checkpoint!r})"
