"""The merge's `Output` into the stream processes of a multi-stream global binlog
(docs/streams.md): each merged batch is split per stream (`StreamSplitter`), encoded by that
stream's encoder and sent to its process (`StreamSet`). A huge (spilled) transaction goes to
its stream in parts, encoded from its spill files as they are sent, as the single stream
writes it (`dumper.pipeline.binlog_output`).

The restart protocol, per stream: each stream says where its binlog ends (`K_i`); the DNs
resume from the checkpoints at or below the smallest `K_i` and each stream is sent only what
is after its own `K_i`; DN checkpoints are saved only once every stream synced everything it
was sent up to them."""

from __future__ import annotations

import logging
from pathlib import Path

from binlog_writer import GtidLayout
from cdc.config import Config
from cdc.keys import GlobalKey
from cdc.pauses import Pauses
from cdc.streams import StreamRouter
from dumper.pipeline import Leader, LeaderError, LeaderStats, Term
from dumper.pipeline.binlog_output import gtids_of
from dumper.pipeline.encoded_batch import EncodedBatch
from dumper.pipeline.metadata import GmsMetadata, PipelineMetadata
from dumper.pipeline.output import DiskFull, Fence
from dumper.pipeline.stream_split import StreamSplitter
from dumper.pipeline.txn_encoder import TransactionEncoder, has_spilled
from dumper.streams.frames_pb2 import Batch
from dumper.streams.stream_set import StreamSet
from dumper.streams.wire import ToStream, batch_frame
from merge_joint import Transaction

log = logging.getLogger(__name__)


class StreamOutput:
    """The stream processes, as a `Leader`'s output."""

    def __init__(
        self,
        config: Config,
        state_dir: Path,
        cluster_uuid: str,
        gtids: GtidLayout,
        pauses: Pauses,
        term: Term | None = None,
    ):
        """`cluster_uuid`: each stream derives its own; `gtids`: the layout the encoders
        write for (its flavour); `term`: an HA term's (each stream records where it begins,
        and is told how long the lease is sure)."""
        self.streams = StreamSet(config, cluster_uuid, state_dir, pauses)
        if term is not None:
            self.streams.term = term.number
            self.streams.sure_until = term.sure_until
        self.splitter = StreamSplitter(StreamRouter.of(config))
        # One per stream (its table ids and XID counter are the stream's), kept across
        # pipeline restarts as the single stream's encoder is.
        self.encoders = [
            TransactionEncoder(config.dumper.server_id, gtids=True, flavor=gtids.flavor)
            for _ in range(config.dumper.streams)
        ]
        self.ends: list[GlobalKey | None] = []  # per stream: the key its binlog ends at
        # The merge's key after its last batch, and the streams that had no part in the batches
        # since they were last told it (idle): told at the next checkpoint round, not per batch.
        self._progress: list[int] | None = None
        self._behind: set[int] = set()

    async def prepare(self) -> None:
        # (a progress of the run before: a stream restarted since may not hold its part of it)
        self._progress, self._behind = None, set()
        self.ends = await self.streams.start()
        log.info("streams end at %s", self.ends)

    def last_key(self) -> GlobalKey | None:
        ends = self.ends
        if not ends or any(k is None for k in ends):
            return None  # a stream without a binlog: every DN from its start (CdcStart)
        return min(k for k in ends if k is not None)

    def rotate(self) -> None:
        self.streams.rotate()

    async def write(
        self, ready: list[Transaction], stats: LeaderStats, fence: Fence | None
    ) -> None:
        """Sent, not yet written: each stream syncs before the checkpoints (`sync`)."""
        ends, encoders = self.ends, self.encoders
        progress = self._progress = list(ready[-1].key)
        sent = []
        for i, part in enumerate(self.splitter.split(ready)):
            if not part:
                self._behind.add(i)
                continue
            end = ends[i]
            batch = EncodedBatch()
            for txn in part:
                if end is not None and txn.key <= end:
                    continue  # this stream holds it already (written before a restart)
                if has_spilled(txn.statements):  # spilled: in parts
                    self._send_batch(i, batch, None, stats)  # what came before it, first
                    await self._send_streamed(i, txn, stats, fence)
                    continue
                batch.add(encoders[i], txn)
            self._send_batch(i, batch, progress, stats)
            self._behind.discard(i)
            sent.append(i)
        await self.streams.drain(sent)  # backpressure: the slowest stream paces the merge

    def _send_batch(
        self, stream: int, batch: EncodedBatch, progress: list[int] | None, stats: LeaderStats
    ) -> None:
        """`batch` to `stream` (then empty again); `progress`: the merge's key after it (None:
        more of the merged batch follows)."""
        message = Batch(progress=progress)
        if batch.ends:
            message.ends.extend(batch.ends)
            message.gtids.extend(batch.gtids)
            message.tsos.extend(batch.tsos)
            message.event_count = batch.events
            stats.add(len(batch.ends), batch.events, len(batch.buf))
            # (the events go to the transport as the encoder wrote them: no copy here)
            self.streams.send_pieces(stream, batch_frame(message, batch.buf))
            batch.clear()  # (a new buffer: the one sent is the transport's to keep)
        elif progress is not None:
            self.streams.send(stream, ToStream(batch=message))

    def _tell_progress(self) -> None:
        """The streams idle in the batches since they were last told: the merge's progress.
        Per checkpoint round rather than per batch: a batch (a transaction or a few, at live
        rates) is written to and wakes only the streams it has a part for, not all N. In the
        pipe's order, after every part of theirs up to it: true of each stream told, and told
        before the `sync` that makes it durable (stream_process.py, `read_progress`)."""
        if self._progress is not None:
            message = ToStream(batch=Batch(progress=self._progress))
            for i in sorted(self._behind):
                self.streams.send(i, message)
        self._behind.clear()

    async def _send_streamed(
        self, stream: int, txn: Transaction, stats: LeaderStats, fence: Fence | None
    ) -> None:
        events = self.encoders[stream].iter_encode(txn)
        if events is None:
            return
        count, size = await self.streams.send_streamed(stream, events, txn.size, txn.tso, fence)
        log.info(
            "streamed transaction at TSO %d to stream %d: %d events, %d bytes",
            txn.tso,
            stream,
            count,
            size,
        )
        stats.add(1, count, size)
        stats.spilled_bytes += txn.size

    def checkpoint_round(self, merged_tso: int) -> None:
        """A stream process that died raises (`StreamDied`: the pipeline restarts); the merged
        TSO is the merge's heartbeat to the streams, so an idle stream's lag stays low."""
        self.streams.check()
        self._tell_progress()
        self.streams.send_all(ToStream(merged_tso=merged_tso))

    async def sync(self, stats: LeaderStats) -> None:
        """Every stream syncs all it was sent (rule 3 of the restart protocol, per stream);
        each keeps its own file index."""
        self._tell_progress()
        await self.streams.sync()

    async def reopen(self, error: DiskFull) -> None:
        # A full disk is each stream's own (it waits in place; so does the merge).
        raise LeaderError(str(error)) from error

    def end(self) -> tuple[str, int, int]:
        return "", 0, 0  # each stream's is in its own status (`streams_status`)

    def close(self, may_write: bool) -> None:
        if not may_write:
            self.streams.abandon()

    async def aclose(self, may_write: bool) -> None:
        if not may_write:  # (`close` did, unless a cancel cut the pipeline's way out short)
            self.streams.abandon()
        await self.streams.aclose()


def stream_leader(
    config: Config,
    *,
    state_dir: Path,
    server_uuid: str | None,
    pauses: Pauses,
    metadata: PipelineMetadata | None = None,
    term: Term | None = None,
    **kwargs,
) -> Leader:
    """The `Leader` whose output is the stream processes. `server_uuid`: the cluster's (None:
    read from the GMS); `kwargs`: the rest of `Leader`'s (an HA term's: its sources, DNs)."""
    metadata = metadata or GmsMetadata(config, pauses)
    uuid = server_uuid or metadata.server_uuid()
    output = StreamOutput(config, state_dir, uuid, gtids_of(config, uuid, metadata), pauses, term)
    return Leader(config, output=output, metadata=metadata, term=term, pauses=pauses, **kwargs)
