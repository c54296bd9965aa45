"""What a MergeSource emits: ordered fragments of transactions, and watermarks."""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

from cdc.binlog.header import event_size
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

    A third way is `packed`: its events concatenated in one bytes object (each carries its size
    in its header), `in_memory` None. A MergeSource process builds its statements so (copied out
    of the dump batch in one compiled pass: no list and no bytes object per event; only its
    processor, renaming and wire encoder see those), they cross the pipe as they are, and the
    leader keeps them so: its encoder walks them in C. `events` and `iter_events()` split them
    for any other reader.

    Typed fields in fragment.pxd (compiled: a cdef class, its fields read in C by the
    compiled modules that cimport it).
    """

    __slots__ = ("trace_id", "in_memory", "span", "packed")

    def __init__(
        self,
        trace_id: TraceId | None,
        events: list[bytes] | None = None,
        span: EventSpan | None = None,
        packed: bytes | None = None,
    ):
        self.trace_id = trace_id
        # (None when packed: a reader that forgot `packed` fails loudly, never sees no events)
        self.in_memory: list[bytes] | None = (
            None if packed is not None else [] if events is None else events
        )
        self.span = span
        self.packed = packed

    @property
    def events(self) -> list[bytes]:
        if self.span is not None:
            return list(self.span)
        if self.packed is not None:
            return split_packed(self.packed)
        return self.in_memory

    @events.setter
    def events(self, events: list[bytes]) -> None:
        self.in_memory, self.span, self.packed = events, None, None

    @property
    def spilled(self) -> bool:
        return self.span is not None

    @property
    def count(self) -> int:
        """Number of events (without reading a spilled statement back)."""
        if self.span is not None:
            return self.span.count
        return len(self.in_memory if self.packed is None else split_packed(self.packed))

    @property
    def size(self) -> int:
        """Bytes of its events (without reading a spilled statement back)."""
        if self.span is not None:
            return self.span.size
        return sum(map(len, self.in_memory)) if self.packed is None else len(self.packed)

    def iter_events(self) -> Iterator[bytes]:
        return iter(self.span if self.span is not None else self.events)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Statement):
            return NotImplemented
        return self.trace_id == other.trace_id and self.events == other.events

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        where = f"spilled {self.span.size} bytes" if self.span is not None else self.events
        return f"Statement(trace_id={self.trace_id!r}, events={where!r})"


def split_packed(packed: bytes) -> list[bytes]:
    """The events of a packed statement (`Statement.packed`), each as its own bytes. The wire's
    decode checked that their sizes add up."""
    events = []
    pos = 0
    while pos < len(packed):
        n = event_size(packed, pos)
        events.append(packed[pos : pos + n])
        pos += n
    return events


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


def new_fragment(key, dn, txn_id, participants, kind, statements, markers, timestamp):  # C: .pxd
    """`Fragment(...)` with every field given, set one by one: compiled, no Python call of the
    constructor (its argument parsing cost ~300 instructions, once per fragment on each side of
    the pipe)."""
    f = Fragment.__new__(Fragment)
    f.key = key
    f.dn = dn
    f.txn_id = txn_id
    f.participants = participants
    f.kind = kind
    f.statements = statements
    f.markers = markers
    f.timestamp = timestamp
    return f


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
