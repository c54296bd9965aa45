"""The MergeJoint task: drains the shared source queue into the merger, yields ready
transactions and records markers in the topology history before they take effect."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from cdc import stage_trace
from cdc.cn.schema import CDC_START, FLUSH_LOGS, META_CHANGE, STORAGE_CHANGE
from cdc.keys import Checkpoint, GlobalKey, SortKey, lift
from merge_joint.merger import Merger, Transaction
from merge_source import Fragment, FragmentKind, Watermark
from topology import SchemaRecord, TopologyRecord

log = logging.getLogger(__name__)

Batch = list[Fragment | Watermark]


class MergeJoint:
    def __init__(
        self,
        queue: asyncio.Queue[Batch],
        sources: dict[int, SortKey | None],
        record_topology: Callable[[TopologyRecord], object] | None = None,
        record_schema: Callable[[SchemaRecord], object] | None = None,
        on_marker: Callable[[Transaction], Awaitable[None]] | None = None,
    ):
        self.queue = queue
        self.merger = Merger(sources)
        self._record_topology = record_topology
        self._record_schema = record_schema
        # Called for each INSTRUCTION transaction after its history is recorded and before
        # anything after it is merged (StorageChange adds a source there).
        self._on_marker = on_marker
        self.transactions_out = 0
        # Per DN: (lifted watermark, source checkpoint) not yet handed out, oldest first.
        self._checkpoints: dict[int, deque[tuple[GlobalKey, Checkpoint]]] = {}

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
        push_fragment = merger.push_fragment
        while True:
            batch = await queue.get()
            # Nothing is popped while batches are pushed, so of each DN's watermarks only the
            # last one matters to the merge, and of its checkpoints only the last one is kept
            # (an older one would only be a restart point further back): one push per DN and
            # drain instead of one per watermark.
            marks: dict[int, Watermark] = {}
            cps: dict[int, Watermark] = {}
            while True:
                for item in batch:
                    if type(item) is Watermark:
                        marks[item.dn] = item
                        if item.checkpoint is not None:
                            cps[item.dn] = item
                    else:
                        push_fragment(item)  # type: ignore[arg-type]
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
                last = ready[-1]
                if last.kind is FragmentKind.INSTRUCTION and self._on_marker is not None:
                    await self._on_marker(last)
                self.transactions_out += len(ready)
                if stage_trace.enabled:  # `cdc bench latency`
                    for txn in ready:
                        stage_trace.stamp("merged", txn.tso)
                yield ready

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
                    pass  # the dumper rotates on it
            elif self._record_schema:
                schema = json.loads(m.get("schema_json") or "{}")
                self._record_schema(
                    SchemaRecord(txn.tso, m["db"], m["tbl"], m["ddl"], schema, f"ddl-{m['id']}")
                )
