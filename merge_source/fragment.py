"""What a MergeSource emits: ordered fragments of transactions, and watermarks."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from merge_source.sorter import Kind, SortKey

# The order of the global binlog: (tso, kind, dn, seq). All fragments of one CN transaction
# share (tso, BRANCH, 0, 0); local transactions are told apart by their DN and binlog position.
GlobalKey = tuple[int, int, int, int]


class FragmentKind(Enum):
    DATA = "data"  # a CN transaction's branch on user tables
    LOCAL = "local"  # a non-CN transaction committed directly on the DN
    HEARTBEAT = "heartbeat"  # a CN heartbeat: nothing to emit, but it moves the watermark
    INSTRUCTION = "instruction"  # a marker in __cdc_instruction__ (CdcStart, StorageChange, ...)
    DDL = "ddl"  # a logical DDL marker in __cdc_ddl_record__


TraceId = tuple[int, int]


@dataclass(slots=True)
class Statement:
    """The row events of one SQL statement: TABLE_MAP(s) then rows, raw bytes as on the DN.

    `trace_id` comes from the statement's `/*CDC trace=<seq>.<subseq> ... */` hint (None for a
    statement without one); MergeJoint orders a transaction's statements by it.
    """

    trace_id: TraceId | None
    events: list[bytes] = field(default_factory=list)


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
    def global_key(self) -> GlobalKey:
        return global_key(self.dn, self.key)


def global_key(dn: int, key: SortKey) -> GlobalKey:
    if key.kind == Kind.BRANCH:
        return (key.tso, Kind.BRANCH, 0, 0)
    return (key.tso, key.kind, dn, key.seq)


def lift(dn: int, key: SortKey) -> GlobalKey:
    """A source's watermark in the global key space: nothing from `dn` will sort at or below it."""
    return (key.tso, key.kind, dn, key.seq)


@dataclass(frozen=True, slots=True)
class Watermark:
    """No fragment with a key ≤ `key` will come from `dn` any more.

    `checkpoint` (a `SourceCheckpoint`) is where this DN's binlog must be re-read from once
    everything up to `lift(dn, key)` is durably in the global binlog.
    """

    dn: int
    key: SortKey
    checkpoint: Any = None
