"""The merge process of a multi-stream global binlog (`[dumper] streams = N`, docs/streams.md):
MergeSources → MergeJoint → `StreamSplitter` → one encoder per stream → each stream's process
(`StreamSet`). A huge (spilled) transaction goes to its stream in parts, encoded from its spill
files as they are sent, as the single stream writes it (`Leader._write_streamed`). It serves no binlog itself: its port answers `SHOW BINARY STREAMS`, the
streams' ports serve them.

The restart protocol, per stream: each stream says where its binlog ends (`K_i`); the DNs
resume from the checkpoints at or below the smallest `K_i` and each stream is sent only what
is after its own `K_i`; DN checkpoints are saved only once every stream synced everything it
was sent up to them."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

from cdc.config import Config
from cdc.pauses import Pauses
from cdc.streams import StreamRouter, stream_port
from dumper.heartbeats import heartbeats
from dumper.pipeline import Leader, leader_status
from dumper.pipeline.leader import EncodedBatch
from dumper.pipeline.stream_split import StreamSplitter
from dumper.pipeline.txn_encoder import TransactionEncoder
from dumper.role import Role
from dumper.streams.frames_pb2 import Batch
from dumper.streams.stream_set import StreamSet
from dumper.streams.wire import ToStream

log = logging.getLogger(__name__)


class StreamLeader(Leader):
    """The `Leader` whose writer is the set of stream processes."""

    def __init__(
        self,
        config: Config,
        *,
        state_dir: Path,
        server_uuid: str | None,
        pauses: Pauses,
        **kwargs,
    ):
        """`server_uuid`: the cluster's (None: read from the GMS); each stream derives its own.
        `kwargs`: the rest of `Leader`'s (an HA term's: its term, sources, metadata, DNs)."""
        self.state_dir = state_dir
        self.cluster_uuid = server_uuid
        super().__init__(config, server_uuid=server_uuid, pauses=pauses, **kwargs)
        self._own_writer = False  # a full disk is each stream's own (it waits; so do we)
        self.streams: StreamSet = self.writer  # type: ignore[assignment]
        self.streams.term = self.term  # each stream records where it begins (HA)
        self.streams.sure_until = self.sure_until  # and is told how long the lease is sure
        self.splitter = StreamSplitter(StreamRouter.of(config))
        # One per stream (its table ids and XID counter are the stream's), kept across
        # pipeline restarts as the single stream's encoder is.
        self.encoders = self._new_encoders()
        self.ends: list = []  # per stream: the key its binlog ends at (None: empty)

    def _open_writer(self) -> StreamSet:  # type: ignore[override]
        if self.cluster_uuid is None:
            self.cluster_uuid = self.metadata.server_uuid()
        return StreamSet(self.config, self.cluster_uuid, self.state_dir, self._gtids, self.pauses)

    def _new_encoders(self) -> list[TransactionEncoder]:
        d = self.config.dumper
        flavor = self._gtids.flavor if self._gtids is not None else "mysql"
        return [
            TransactionEncoder(d.server_id, gtids=True, flavor=flavor) for _ in range(d.streams)
        ]

    async def _before_start(self) -> None:
        self.ends = await self.streams.start()
        log.info("streams end at %s", self.ends)

    def _last_key(self):
        ends = self.ends
        if not ends or any(k is None for k in ends):
            return None  # a stream without a binlog: every DN from its start (CdcStart)
        return min(ends)

    async def _write_all(self) -> None:
        assert self.joint is not None
        streams, splitter, encoders = self.streams, self.splitter, self.encoders
        ends = self.ends
        fence = self.fence
        async for ready in self.joint.transactions():
            if fence is not None:
                fence()
            progress = list(ready[-1].key)
            for i, part in enumerate(splitter.split(ready)):
                end = ends[i]
                batch = EncodedBatch()
                for txn in part:
                    if end is not None and txn.key <= end:
                        continue  # this stream holds it already (written before a restart)
                    if any(s.span is not None for s in txn.statements):  # spilled: in parts
                        self._send_batch(i, batch, None)  # what came before it, first
                        await self._send_streamed(i, txn)
                        continue
                    batch.add(encoders[i], txn)
                self._send_batch(i, batch, progress)
            await streams.drain()  # backpressure: the slowest stream paces the merge
            self._batch_written(ready)  # (sent: each stream syncs before checkpoints, below)

    def _send_batch(self, stream: int, batch: EncodedBatch, progress: list[int] | None) -> None:
        """`batch` to `stream` (then empty again); `progress`: the merge's key after it (None:
        more of the merged batch follows)."""
        message = Batch(progress=progress)
        if batch.ends:
            message.events = bytes(batch.buf)
            message.ends.extend(batch.ends)
            message.gtids.extend(batch.gtids)
            message.tsos.extend(batch.tsos)
            message.event_count = batch.events
            self.stats.add(len(batch.ends), batch.events, len(batch.buf))
        elif progress is None:
            return
        self.streams.send(stream, ToStream(batch=message))
        batch.clear()

    async def _send_streamed(self, stream: int, txn) -> None:
        events = self.encoders[stream].iter_encode(txn)
        if events is None:
            return
        count, size = await self.streams.send_streamed(
            stream, events, txn.size, txn.tso, self.fence
        )
        log.info(
            "streamed transaction at TSO %d to stream %d: %d events, %d bytes",
            txn.tso,
            stream,
            count,
            size,
        )
        self.stats.add(1, count, size)
        self.stats.spilled_bytes += txn.size

    async def persist_checkpoints(self) -> None:
        """Every stream syncs all it was sent; then the DN checkpoints up to what was sent are
        saved (rule 3 of the restart protocol, per stream). Also the merge's heartbeat to the
        streams: the merged TSO, so an idle stream's lag stays low."""
        self.streams.check()
        if self.joint is not None:
            self.streams.send_all(ToStream(merged_tso=self.joint.merged_tso))
        written = self.written_key
        if written is None or self.joint is None:
            return
        self._unsaved.update(self.joint.checkpoints_upto(written))
        if not self._unsaved:
            return
        await self.streams.sync()
        await self._save_unsaved(None)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if not self._may_write():  # (`Leader.close` did, unless a cancel cut its way short)
                self.streams.abandon()
            await self.streams.aclose()


def streams_status(config: Config, state_dir: Path) -> list[dict]:
    """Each stream's status as its process last wrote it (its `status.json`)."""
    out = []
    for i in range(config.dumper.streams):
        entry = {"stream": i, "port": stream_port(config.dumper, i)}
        try:
            entry.update(json.loads((state_dir / f"stream{i}" / "status.json").read_text()))
        except (OSError, ValueError):
            entry["problems"] = [f"stream {i}: no status yet"]
        out.append(entry)
    return out


def _status(leader: StreamLeader, config: Config, state_dir: Path) -> dict:
    status = leader_status(leader)
    status["streams"] = streams_status(config, state_dir)
    for s in status["streams"]:
        status["problems"].extend(s.get("problems", []))
    return status


def stream_merge_role(
    config: Config, uuid: str, heartbeat: bool, pauses: Pauses, state_dir: Path
) -> Role:
    """The merge process's `Role`: the pipeline into the streams (and the CN heartbeat)."""
    leader = StreamLeader(config, state_dir=state_dir, server_uuid=uuid, pauses=pauses)
    tasks = {"leader": leader.run}
    if heartbeat:
        tasks["heartbeat"] = functools.partial(heartbeats, config, leader.node, pauses)
    return Role(
        tasks,
        status=functools.partial(_status, leader, config, state_dir),
        binlog_dir=lambda: Path(config.dumper.binlog_dir),
        writer=lambda: None,
        current_notify=lambda: leader.notify,
        merged_tso=leader.merged_tso,
    )
