"""The MergeJoint task: drains the shared source queue into the merger, yields ready
transactions, records markers in the topology history and applies them.

A marker's effect is decided here, where the merge order is known, and carried out by the
pipeline through `SourceSet` (it owns the DN connections and processes): StorageChange starts a
new DN's source that joins exactly after the marker's TSO, CdcStart stops the sources of DNs
that are not storage DNs, FlushLogs rotates the binlog file right after everything before it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from cdc import stage_trace
from cdc.cn_protocol.schema import CDC_START, FLUSH_LOGS, META_CHANGE, STORAGE_CHANGE
from cdc.keys import Checkpoint, GlobalKey, SortKey, lift
from merge_joint.merger import Merger, Transaction
from merge_source import Fragment, FragmentKind, Watermark
from topology import SchemaRecord, TopologyRecord

log = logging.getLogger(__name__)

Batch = list[Fragment | Watermark]


class SourceSet(Protocol):
    """What a marker changes upstream of the merge; the pipeline implements it."""

    async def add_source(self, dn: int, entry: dict[str, Any], tso: int) -> None:
        """Start `dn`'s source (`entry`: its StorageChange listing, with host and port) so that
        it feeds the queue with what follows TSO `tso` and nothing before."""

    def remove_source(self, dn: int) -> None:
        """Stop `dn`'s source: it no longer belongs to the merge."""


class MergeJoint:
    def __init__(
        self,
        queue: asyncio.Queue[Batch],
        sources: dict[int, SortKey | None],
        record_topology: Callable[[TopologyRecord], object] | None = None,
        record_schema: Callable[[SchemaRecord], object] | None = None,
        source_set: SourceSet | None = None,
        rotate: Callable[[], None] | None = None,
    ):
        """`sources`: DN id -> its watermark at start. `source_set`/`rotate`: how StorageChange
        and CdcStart, and FlushLogs, take effect (None: recorded, not applied)."""
        self.queue = queue
        self.merger = Merger(sources)
        self._record_topology = record_topology
        self._record_schema = record_schema
        self._source_set = source_set
        self._rotate = rotate
        self.transactions_out = 0
        # Per DN: (lifted watermark, source checkpoint) not yet handed out, oldest first.
        self._checkpoints: dict[int, deque[tuple[GlobalKey, Checkpoint]]] = {}
        # Every transaction with a smaller TSO has been handed out and consumed (written, for
        # the dumper): set each time the consumer asks for more and nothing is left to pop.
        # Heartbeats move it while no transaction comes (snapshot reads' high watermark).
        self.merged_tso = 0

    def checkpoints_upto(self, written: GlobalKey) -> dict[int, tuple[GlobalKey, Checkpoint]]:
        """For each DN, the newest checkpoint whose watermark is at or below `written`, with
        that (lifted) watermark: once the global binlog durably holds everything up to
        `written`, a restart may begin there."""
        out: dict[int, tuple[GlobalKey, Checkpoint]] = {}
        for dn, pending in self._checkpoints.items():
            while pending and pending[0][0] <= written:
                out[dn] = pending.popleft()
        return out

    async def transactions(self) -> AsyncIterator[list[Transaction]]:
        """Batches of ready transactions, forever. Marker transactions are included (the
        dumper turns DDL markers into Query events and FlushLogs into a rotation) after their
        history was recorded."""
        merger = self.merger
        queue = self.queue
        while True:
            low = merger.low_watermark()  # all it released was consumed: see merged_tso
            if low is not None:
                self.merged_tso = low[0]
            batch = await queue.get()
            # Nothing is popped while batches are pushed, so of each DN's watermarks only the
            # last one matters to the merge, and of its checkpoints only the last one is kept
            # (an older one would only be a restart point further back): one push per DN and
            # drain instead of one per watermark.
            marks: dict[int, Watermark] = {}
            cps: dict[int, Watermark] = {}
            while True:
                merger.take(batch, marks, cps)  # compiled: the items' fields read in C
                try:
                    batch = queue.get_nowait()  # drain what is there: fewer, larger merges
                except asyncio.QueueEmpty:
                    break
            for mark in marks.values():
                merger.push_watermark(mark)
            for dn, mark in cps.items():
                self._checkpoints.setdefault(dn, deque()).append(
                    (lift(dn, mark.key), mark.checkpoint)
                )
            while ready := merger.pop_ready():
                for txn in ready:
                    if txn.kind in (FragmentKind.INSTRUCTION, FragmentKind.DDL):
                        await asyncio.to_thread(self._record_markers, txn)
                # The merger stops right after a marker: it can only be the last one.
                last = ready[-1]
                marker = last.kind is FragmentKind.INSTRUCTION
                if marker:  # before anything after it is merged
                    await self._apply_sources(last)
                self.transactions_out += len(ready)
                if stage_trace.enabled:  # `cdc bench latency`
                    for txn in ready:
                        stage_trace.stamp("merged", txn.tso)
                yield ready
                # The consumer asks for more once it wrote `ready`: a rotation here puts
                # everything before the marker in the old file and everything after in the new.
                if marker and self._rotate is not None and _has_marker(last, FLUSH_LOGS):
                    self._rotate()

    async def _apply_sources(self, txn: Transaction) -> None:
        """StorageChange: a DN it adds joins the merge exactly after the marker's TSO. CdcStart:
        merged DNs it does not list (configured, not storage DNs) leave the merge."""
        if self._source_set is None:
            return
        merger = self.merger
        for marker in txn.fragments[0].markers:
            kind = marker.get("type")
            if kind not in (CDC_START, STORAGE_CHANGE):
                continue
            content = json.loads(marker.get("content") or "{}")
            if kind == CDC_START:
                listed = {int(d["id"]) for d in content.get("dns", [])}
                for dn in [d for d in merger.sources if d not in listed]:
                    log.info("dn%d is not a storage DN: leaves the merge", dn)
                    self._source_set.remove_source(dn)
                    merger.remove_source(dn)
                continue
            added = content.get("added", [])
            for entry in content.get("dns", []):
                dn = int(entry["id"])
                if dn in merger.sources or dn not in added:
                    continue
                await self._source_set.add_source(dn, entry, txn.tso)
                merger.add_source(dn, SortKey.joining_after(txn.tso))
                log.info("dn%d joins the merge after TSO %d (StorageChange)", dn, txn.tso)

    def _record_markers(self, txn: Transaction) -> None:
        markers = txn.fragments[0].markers
        for m in markers:
            if txn.kind is FragmentKind.INSTRUCTION:
                kind = m.get("type")
                if kind in (CDC_START, STORAGE_CHANGE, META_CHANGE) and self._record_topology:
                    content = json.loads(m.get("content") or "{}")
                    self._record_topology(
                        TopologyRecord(txn.tso, kind, f"instruction-{m['id']}", content)
                    )
                elif kind == FLUSH_LOGS:
                    pass  # nothing to record: it rotates (`transactions`)
            elif self._record_schema:
                schema = json.loads(m.get("schema_json") or "{}")
                self._record_schema(
                    SchemaRecord(txn.tso, m["db"], m["tbl"], m["ddl"], schema, f"ddl-{m['id']}")
                )


def _has_marker(txn: Transaction, kind: str) -> bool:
    return any(m.get("type") == kind for m in txn.fragments[0].markers)
