"""The Dumper leader: runs the pipeline (MergeSources → MergeJoint) and writes what it merges into
its `Output` (output.py: the global binlog's files, binlog_output.py, or a multi-stream binlog's
stream processes); the checkpoints are checkpoints.py's, the status status.py's.

Restart protocol (exactly once across crashes):
1. The writer truncates the newest file to its last complete transaction; the last `CTS::` mark
   of the binlog gives the global key of the last transaction that is durably written.
2. Each DN's MergeSource restarts from its persisted checkpoint (the earliest position holding a
   branch not yet durably written) and drops fragments at or below that key.
3. Checkpoints are persisted only after the writer has fsynced every transaction up to the
   watermark they were taken at, so a checkpoint never skips an unwritten branch.

Faults of what it depends on pause it, never end it (docs/faults.md): a GMS that went away
holds back the checkpoints (the newest per DN is kept for the next try) and whatever reads or
records metadata (`GmsMetadata` waits), while writing goes on; a full binlog file system stops
the writer at the last whole transaction (`BinlogWriter.abandon`), and once there is room again
the pipeline restarts in place by the protocol above, so the file continues at the same byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from binlog_writer import BinlogWriter
from cdc import stage_trace
from cdc.config import Config, NodeConfig
from cdc.keys import Checkpoint, GlobalKey, stream_name
from cdc.pauses import Pauses, is_disk_full
from cdc.tasks import cancel_and_wait
from dumper.pipeline.binlog_output import BinlogOutput, gtids_of
from dumper.pipeline.checkpoints import Checkpoints
from dumper.pipeline.disk_room import spill_room
from dumper.pipeline.dn_set import joined_at, joining_node, storage_dns
from dumper.pipeline.metadata import CheckpointTooOld, GmsMetadata, PipelineMetadata
from dumper.pipeline.output import DiskFull, LeaderError, Output
from dumper.pipeline.sources import DnSourceFactory, Source, SourceFactory
from dumper.pipeline.status import LeaderStats
from dumper.pipeline.term import Takeover, Term
from merge_joint import MergeJoint, Transaction
from merge_source import ForkServer, NameMap, SourceProcessDied, SpillFull

log = logging.getLogger(__name__)


class Leader:
    """The pipeline of one leader term. Its dependencies are passed in (defaults: the real
    ones from `config`): `factory` makes each DN's source, `metadata` is the GMS, `output`
    where the merged transactions go (default: the binlog files, by `writer`; a multi-stream
    binlog passes its stream processes). It owns the set of DNs it merges (`nodes`: the
    configured ones and those a StorageChange added); `service.py` asks it for their
    addresses. `term`: HA's (its number, fence and takeover observer); None for the plain
    leader."""

    def __init__(
        self,
        config: Config,
        *,
        factory: SourceFactory | None = None,
        metadata: PipelineMetadata | None = None,
        writer: BinlogWriter | None = None,
        output: Output | None = None,
        nodes: dict[int, NodeConfig] | None = None,
        server_uuid: str | None = None,
        term: Term | None = None,
        pauses: Pauses | None = None,
        forks: ForkServer | None = None,
    ):
        """`forks`: the fork server of its MergeSource processes (None: its own, started for
        the occasion; `cdc start` passes the one it forked before its event loop ran)."""
        self.config = config
        self.pauses = pauses or Pauses()  # what it waits for now (`cdc status`, the metrics)
        self.metadata: PipelineMetadata = metadata or GmsMetadata(config, self.pauses)
        self.output: Output = output or BinlogOutput(
            config,
            self.pauses,
            writer,
            None if writer is not None else gtids_of(config, server_uuid, self.metadata),
        )
        self.factory: SourceFactory = factory or DnSourceFactory(
            config, self.metadata.names_at, forks
        )
        # DN id -> its address; HA passes one dict to every term's Leader, so that a DN added
        # by StorageChange (not in cdc.toml) is known to the next term of this process too.
        self.nodes = nodes if nodes is not None else {n.id: n for n in config.dn}
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=config.pipeline.queue_batches)
        self.sources: dict[int, Source] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self.joint: MergeJoint | None = None
        self.checkpoints: Checkpoints | None = None  # those of the pipeline's current run
        self.stats = LeaderStats()
        self.written_key: GlobalKey | None = None
        self.notify = asyncio.Event()  # set after each batch reaches the file (dump server)
        # HA: raises if this process may no longer write (its lease ran out); called before
        # every batch. `term` is the lease term, for logs and status (0 = no HA).
        self.fence: Callable[[], None] | None = term.fence if term is not None else None
        self.term = term.number if term is not None else 0
        self.takeover: Takeover | None = term.takeover if term is not None else None
        # Until when (monotonic) the lease is sure: the stream processes' gates are told.
        self.sure_until: Callable[[], float] = (
            term.sure_until if term is not None else lambda: math.inf
        )

    @property
    def writer(self) -> BinlogWriter:
        """The binlog writer of a single-stream pipeline (a multi-stream one has none here:
        each stream's process has its own)."""
        if not isinstance(self.output, BinlogOutput):
            raise AttributeError("a multi-stream pipeline writes in its stream processes")
        return self.output.writer

    def merged_tso(self) -> int:
        """Every transaction with a smaller TSO is written (`MergeJoint.merged_tso`; 0 before
        the merge runs): snapshot reads wait for it to pass their high watermark."""
        return self.joint.merged_tso if self.joint is not None else 0

    def node(self, dn: int) -> NodeConfig | None:
        """The address of a DN this pipeline knows (configured, or added by StorageChange)."""
        return self.nodes.get(dn)

    # -- start --------------------------------------------------------------------------------
    def start(self) -> None:
        """Synchronous part of the start: schema, resume key, one MergeSource per storage DN."""
        meta = self.metadata
        meta.prepare()
        self.factory.prepare()
        self._mark("GMS migrated")
        self.written_key = self.output.last_key()
        self._mark("last key found")
        records = meta.topology()
        storage = storage_dns(records)
        for node in list(self.nodes.values()):
            if storage is not None and node.id not in storage:
                log.info("dn%d is configured but not a storage DN (yet): not merged", node.id)
                continue
            try:
                cp = meta.resume_checkpoint(stream_name(node.id), self.written_key)
            except CheckpointTooOld as exc:
                raise LeaderError(str(exc)) from None
            joined = joined_at(records, node.id)
            if cp is None and joined is not None and storage is not None:
                # Added by StorageChange but no checkpoint yet: start again at the marker.
                names = meta.names_at(node.id, joined) or NameMap(node.id)
                after = GlobalKey.after_tso(joined)
                self.sources[node.id] = self._make(node, None, after, names)
            else:
                self.sources[node.id] = self._make(node, cp)
        self._mark("checkpoints and names read")
        self.joint = MergeJoint(
            self.queue,
            dict.fromkeys(self.sources),
            meta.record_topology,
            meta.record_schema,
            source_set=self,
            rotate=self.output.rotate,
        )
        log.info("leader (term %d): resuming after %s", self.term, self.written_key)

    def _make(
        self,
        node: NodeConfig,
        cp: Checkpoint | None,
        resume_after: GlobalKey | None = None,
        names: NameMap | None = None,
    ) -> Source:
        return self.factory.make(node, cp, self.queue, self.written_key, resume_after, names)

    def _mark(self, phase: str) -> None:
        if self.takeover is not None and not self.takeover.done:
            self.takeover.mark(phase)

    # -- the SourceSet of MergeJoint: what StorageChange and CdcStart markers change ----------
    async def add_source(self, dn: int, entry: dict[str, Any], tso: int) -> None:
        source = await asyncio.to_thread(self._joining_source, dn, entry, tso)
        self.sources[dn] = source
        self._tasks[dn] = asyncio.create_task(source.run(), name=f"merge-source-dn{dn}")

    def remove_source(self, dn: int) -> None:
        self.sources.pop(dn, None)
        task = self._tasks.pop(dn, None)
        if task is not None:
            task.cancel()

    def _joining_source(self, dn: int, entry: dict[str, Any], tso: int) -> Source:
        node = joining_node(self.nodes, dn, entry)
        self.nodes.setdefault(dn, node)
        names = self.metadata.names_at(dn, tso) or NameMap(dn)
        # Everything of the new DN up to the marker is history the global binlog never had.
        return self._make(node, None, resume_after=GlobalKey.after_tso(tso), names=names)

    # -- run ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Run the pipeline until cancelled. A MergeSource process that dies (killed, crashed)
        restarts it the way a leader restart does: from the global binlog and the checkpoints.
        Errors that a restart cannot fix (a corrupt DN binlog, a refused login) stop it."""
        restarts: deque[float] = deque()
        limit = self.config.pipeline.max_restarts_per_minute
        try:
            while True:
                try:
                    await self._run_pipeline()
                except DiskFull as exc:
                    await self.output.reopen(exc)
                    log.info("restarting the pipeline from the global binlog")
                except (SpillFull, OSError) as exc:
                    if isinstance(exc, OSError) and not is_disk_full(exc):
                        raise  # (a MergeSource in this process: its spill directory is full)
                    directory = Path(self.config.pipeline.spill_dir or tempfile.gettempdir())
                    await spill_room(directory, str(exc), self.pauses)
                    log.info("restarting the pipeline from the global binlog")
                except SourceProcessDied as exc:
                    now = time.monotonic()
                    restarts.append(now)
                    while restarts and restarts[0] < now - 60:
                        restarts.popleft()
                    if len(restarts) > limit:
                        raise LeaderError(
                            f"{exc}; {len(restarts)} restarts within a minute: giving up"
                        ) from exc
                    self.stats.restarts += 1
                    log.warning("%s: restarting the pipeline from the global binlog", exc)
                    await asyncio.sleep(0.2 * len(restarts))
        finally:
            try:
                await self.factory.aclose()
                self.close()
            finally:
                # (also when a cancel cut `close` short: a fenced term's streams are told)
                await self.output.aclose(self._may_write())

    async def _run_pipeline(self) -> None:
        self.sources, self._tasks = {}, {}
        self.queue = asyncio.Queue(maxsize=self.config.pipeline.queue_batches)
        await self.factory.start()  # e.g. a fork server: overlaps the reads of the GMS below
        await self.output.prepare()
        await asyncio.to_thread(self.start)
        assert self.joint is not None
        self.checkpoints = Checkpoints(
            self.joint,
            lambda: self.written_key,
            self.output,
            self.metadata,
            self.stats,
            self.pauses,
        )
        for dn, source in self.sources.items():
            self._tasks[dn] = asyncio.create_task(source.run(), name=f"merge-source-dn{dn}")
        self._mark("sources started")
        writer_task = asyncio.create_task(self._write_all(), name="writer")
        interval = self.config.pipeline.checkpoint_interval_ms / 1000
        cp_task = asyncio.create_task(self.checkpoints.run(interval), name="checkpoints")
        watch = None
        if self.takeover is not None and not self.takeover.done:
            watch = asyncio.create_task(self.takeover.watch(self), name="takeover")
        try:
            while True:  # sources may be added (StorageChange): look at the current set each time
                tasks = [writer_task, cp_task, *self._tasks.values()]
                done, _ = await asyncio.wait(
                    tasks, timeout=1.0, return_when=asyncio.FIRST_EXCEPTION
                )
                for t in done:
                    if t.exception() is not None:
                        raise t.exception()
                    raise LeaderError(f"{t.get_name()} stopped unexpectedly")
        finally:
            tasks = [writer_task, cp_task, *self._tasks.values()]
            await cancel_and_wait(tasks + ([watch] if watch is not None else []))

    async def _write_all(self) -> None:
        assert self.joint is not None
        output, stats, fence = self.output, self.stats, self.fence
        async for ready in self.joint.transactions():
            if fence is not None:
                fence()
            await output.write(ready, stats, fence)
            self._batch_written(ready)

    def _batch_written(self, ready: list[Transaction]) -> None:
        """`ready` reached the binlog (or was sent to the streams, which sync before the
        checkpoints): the written key, the stats, the server's wake-up."""
        if stage_trace.enabled:  # `cdc bench latency`
            for txn in ready:
                stage_trace.stamp("written", txn.tso)
        self.written_key = ready[-1].key
        self.stats.last_tso = ready[-1].tso
        self.stats.last_commit_at = time.time()
        self.notify.set()
        self.notify = asyncio.Event()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.output.close(self._may_write())
        with contextlib.suppress(Exception):
            self.metadata.close()

    def _may_write(self) -> bool:
        if self.fence is None:
            return True
        try:
            self.fence()
        except Exception:  # noqa: BLE001 - the fence's refusal, whatever its class
            return False
        return True
