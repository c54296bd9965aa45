"""The MergeSource task for one DN: dump client → processor → a bounded queue (backpressure).

The queue (shared by all sources, bounded) carries batches of `Fragment`/`Watermark`; when MergeJoint falls behind, the queue
fills, this task stops reading, and TCP flow control slows the DN's dump thread: memory stays
bounded by the queue size.

A `SourceSpec` says everything a MergeSource needs to start; it is what the leader sends to a
MergeSource process (`source_process.py`, `worker.py`) or uses in its own process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from cdc import stage_trace
from cdc.keys import Checkpoint, GlobalKey
from cdc.protocol import BinlogPosition, DumpClient, DumpSettings
from cdc.protocol.client import MysqlClient
from cdc.protocol.dump_packets import EVENT_AT
from cdc.protocol.packets import ProtocolError, ServerError
from merge_source.classifier import cn_txn_id
from merge_source.fragment import Fragment, Watermark
from merge_source.processor import SourceProcessor
from merge_source.renamer import NameMap
from merge_source.scan import packed_count
from merge_source.spill import DEFAULT_SPILL_BYTES

log = logging.getLogger(__name__)

Batch = list[Fragment | Watermark]


@dataclass(slots=True)
class SourceSpec:
    settings: DumpSettings
    start: BinlogPosition
    dn_id: int
    dn_name: str
    resume_after: GlobalKey | None = None
    max_tso_seen: int = 0
    names: NameMap | None = None
    wait_for_start: bool = False
    spill_bytes: int = DEFAULT_SPILL_BYTES
    spill_dir: str | None = None

    def processor(self) -> SourceProcessor:
        return SourceProcessor(
            self.dn_id,
            self.dn_name,
            resume_after=self.resume_after,
            max_tso_seen=self.max_tso_seen,
            names=self.names,
            wait_for_start=self.wait_for_start,
            spill_bytes=self.spill_bytes,
            spill_dir=self.spill_dir,
        )


@dataclass(slots=True)
class SourceStats:
    events: int = 0
    bytes: int = 0
    fragments: int = 0
    started_at: float = 0.0


class MergeSource:
    def __init__(
        self,
        settings: DumpSettings,
        processor: SourceProcessor,
        start: BinlogPosition,
        queue: asyncio.Queue[Batch],
    ):
        self.settings = settings
        self.processor = processor
        self.client = DumpClient(settings, start)
        # Shared by all sources of one MergeJoint and bounded: that is the backpressure.
        self.queue = queue
        self.stats = SourceStats()
        # A MergeSource process reads its batches packed (`SourceProcessor.feed_packed`: no
        # bytes object per event); in the leader's process the statements must stay lists of
        # events (the merge and the encoder read those), so it reads them as bytes.
        self.packed = False
        self.error: BaseException | None = None
        # After a DN restart: (the suspects looked for, CN transactions in its XA RECOVER,
        # where its binlog ended then)
        self._lost_check: tuple[set[int], set[int], tuple[str, int]] | None = None

    @classmethod
    def from_spec(cls, spec: SourceSpec, queue: asyncio.Queue[Batch]) -> MergeSource:
        return cls(spec.settings, spec.processor(), spec.start, queue)

    @property
    def dn_id(self) -> int:
        return self.processor.dn_id

    @property
    def name(self) -> str:
        return self.processor.dn_name

    def checkpoint(self) -> Checkpoint | None:
        return self.processor.checkpoint()

    @property
    def last_heard(self) -> float:
        """Seconds since the DN last sent anything (event or heartbeat)."""
        if not self.client.last_packet_at:
            return float("inf")
        return time.monotonic() - self.client.last_packet_at

    def status(self) -> dict[str, Any]:
        """What `cdc status` shows of this source (JSON-able: it crosses process boundaries)."""
        wm = self.processor.sorter.watermark
        state = "error" if self.error else ("up" if self.client.connected else "connecting")
        return {
            "state": state,
            "error": str(self.error) if self.error else None,
            "position": str(self.client.position),
            "watermark_tso": wm.tso if wm else None,
            "pending": self.processor.sorter.pending,
            "silent_s": round(min(self.last_heard, 1e9), 1),
            "events": self.stats.events,
            "bytes": self.stats.bytes,
        }

    async def _settle_lost_branches(self) -> Batch:
        """After a DN restart: which branches held then did the DN lose (processor.py,
        `_dn_restarted`)? XA RECOVER first, then where its binlog ends: anything resolved
        before the XA RECOVER is in the binlog before that end. A failed look waits for the
        next batch. A restart while a look is pending makes a new set of suspects (and a
        look older than that restart may miss branches prepared since): it looks again."""
        suspects = self.processor.restart_suspects
        if self._lost_check is not None and self._lost_check[0] is not suspects:
            self._lost_check = None
        if self._lost_check is None:
            s = self.settings
            client = None
            try:
                client = await MysqlClient.connect(s.host, s.port, s.user, s.password)
                xa = await client.query("XA RECOVER")
                status = await client.query("SHOW MASTER STATUS")
            except (OSError, ProtocolError, ServerError, TimeoutError) as exc:
                log.warning(
                    "%s: XA RECOVER after the DN restart failed (%s); again", self.name, exc
                )
                return []
            finally:
                if client is not None:
                    client.close()
            recovered = set()
            for fmt, gtrid_len, _bqual_len, data in xa.rows:
                gtrid = (data or "").encode()[: int(gtrid_len or 0)]
                txn = cn_txn_id(int(fmt or 0), gtrid)
                if txn is not None:
                    recovered.add(txn)
            file, pos = status.rows[0][0], int(status.rows[0][1])
            self._lost_check = (suspects, recovered, (file, pos))
        _, recovered, upto = self._lost_check
        position = self.client.position
        out = self.processor.settle_lost_branches(recovered, upto, (position.file, position.pos))
        if self.processor.restart_suspects is None:
            self._lost_check = None
        return out

    async def run(self) -> None:
        """Read the DN forever; a fatal error is kept in `error` and re-raised."""
        self.stats.started_at = time.monotonic()
        feed = self.processor.feed_packed if self.packed else self.processor.feed_raw
        stats = self.stats
        try:
            async for file, events in self.client.raw_batches(self.packed):
                got = time.monotonic()
                out: Batch = feed(file, events)
                if self.processor.restart_suspects is not None:
                    out += await self._settle_lost_branches()
                if stage_trace.enabled:  # `cdc bench latency`: when each fragment was released
                    for o in out:
                        if type(o) is Fragment:
                            stage_trace.stamp("src", o.key.tso, got)
                _count(stats, events)
                if out:
                    stats.fragments = self.processor.fragments_out
                    await self.queue.put(out)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.error = exc
            log.error("%s: MergeSource stopped: %s", self.name, exc)
            raise
        finally:
            await self.client.close()


def _count(stats: SourceStats, batch: list) -> None:
    """A batch's events and their bytes into `stats`: runs of packets (`(data, start, stop)`,
    a packed batch) counted in one compiled pass each, without the 5-byte packet heads."""
    for piece in batch:
        if type(piece) is tuple:
            data, start, stop = piece
            n = packed_count(data, start, stop, -1)
            stats.events += n
            stats.bytes += stop - start - EVENT_AT * n
        else:
            stats.events += 1
            stats.bytes += len(piece)
