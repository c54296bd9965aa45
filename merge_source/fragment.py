"""What a MergeSource emits: ordered fragments of transactions, and watermarks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
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


class Statement:
    """The row events of one SQL statement: TABLE_MAP(s) then rows, raw bytes as on the DN.

    `trace_id` comes from the statement's `/*CDC trace=<seq>.<subseq> ... */` hint (None for a
    statement without one); MergeJoint orders a transaction's statements by it.

    The events are in memory (a list), or, for a transaction larger than the spill threshold, in
    a spill file (`span`, see `spill.py`). `events` then reads them back on every access, as a new
    list nobody keeps, so callers that only want a few statements keep working; `iter_events()`
    streams them one by one and is the accessor for code that must handle huge transactions.
    """

    __slots__ = ("trace_id", "_events", "span")

    def __init__(
        self,
        trace_id: TraceId | None,
        events: list[bytes] | None = None,
        span: EventSpan | None = None,
    ):
        self.trace_id = trace_id
        self._events: list[bytes] = [] if events is None else events
        self.span = span

    @property
    def events(self) -> list[bytes]:
        if self.span is not None:
            return list(self.span)
        return self._events

    @events.setter
    def events(self, events: list[bytes]) -> None:
        self._events, self.span = events, None

    @property
    def spilled(self) -> bool:
        return self.span is not None

    @property
    def count(self) -> int:
        """Number of events (without reading a spilled statement back)."""
        return self.span.count if self.span is not None else len(self._events)

    @property
    def size(self) -> int:
        """Bytes of its events (without reading a spilled statement back)."""
        return self.span.size if self.span is not None else sum(map(len, self._events))

    def iter_events(self) -> Iterator[bytes]:
        return iter(self.span if self.span is not None else self._events)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Statement):
            return NotImplemented
        return self.trace_id == other.trace_id and self.events == other.events

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        where = f"spilled {self.span.size} bytes" if self.span is not None else self._events
        return f"Statement(trace_id={self.trace_id!r}, events={where!r})"


@dataclass(slots=True)
class Fragment:
    key: SortKey
    dn: int
    txn_id: int  # 0 for a local transaction
    participants: tuple[int, ...]
    kind: FragmentKind
    statements: list[Statement] = field(default_factory=list)
    # Decoded marker rows (INSTRUCTION/DDL): column name -> value.
    markers: list[dict[str, Any]] = field(default_factory=list)
    timestamp: int = 0  # DN commit time (seconds), used as the event timestamp downstream

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

    A plain slots class, not a frozen dataclass: the leader decodes one per wire record, and a
    frozen dataclass's `__init__` (one `object.__setattr__` per field) cost ~3x as much.
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
