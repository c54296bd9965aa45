"""One read of a binlog file for many dumps (docs/dumper.md "Many consumers").

A dump sends a file as batches of whole events, each framed as MySQL packets. The packets of a
batch depend on three things only: the file's bytes (immutable once written: the writer only
appends, whole transactions), where the batch starts, and the sequence id of its first packet.
Dumps of the same file that start at the same place (a fan-out: every consumer copying from
`binlog.000001:4`, or following the live end) take the same batches in the same order with the
same sequence ids (one packet per event since the dump command), so the first dump to reach a
batch reads and frames it, and the others send the very same bytes object: no pread, no
per-event Python, one `transport.write` per batch. What the kernel copies into each socket stays
per consumer, as in mariadbd.

Bounded: an LRU of the newest batches, `max_bytes` in all (a batch is `batch_bytes` of events).
Consumers far apart miss and read for themselves, as before.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

DEFAULT_MAX_BYTES = 8 << 20


@dataclass(slots=True, frozen=True)
class FramedBatch:
    end: int  # file offset after its last event
    data: bytes | bytearray  # the packets, framed (`framing.frame_whole_events`; never changed)
    seq: int  # the sequence id after its last packet
    events: int
    event_bytes: int
    # The file's first and last 8 bytes of the batch when it was read: a user checks them
    # against the file before sending (a file cut back and rewritten, as an HA copy at a new
    # term or a writer's crash recovery do, never serves stale bytes; purged names are never
    # reused).
    head: bytes
    tail: bytes


class SharedReads:
    """Framed batches by (file name, start offset, first sequence id), newest kept."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._batches: OrderedDict[tuple[str, int, int], FramedBatch] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, name: str, pos: int, seq: int) -> FramedBatch | None:
        batch = self._batches.get((name, pos, seq))
        if batch is None:
            self.misses += 1
            return None
        self.hits += 1
        self._batches.move_to_end((name, pos, seq))
        return batch

    def put(self, name: str, pos: int, seq: int, batch: FramedBatch) -> None:
        key = (name, pos, seq)
        if key in self._batches or len(batch.data) > self.max_bytes // 4:
            return
        self._batches[key] = batch
        self._bytes += len(batch.data)
        while self._bytes > self.max_bytes:
            _, old = self._batches.popitem(last=False)
            self._bytes -= len(old.data)
