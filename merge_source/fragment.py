"""What a MergeSource emits: ordered fragments of transactions, and watermarks."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from merge_source.sorter import SortKey


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


@dataclass(frozen=True, slots=True)
class Watermark:
    """No fragment with a key ≤ `key` will come from `dn` any more."""

    dn: int
    key: SortKey
