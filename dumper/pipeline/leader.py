"""The Dumper leader: runs the pipeline (MergeSources → MergeJoint) and writes the global binlog.

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
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlog_writer import (
    BinlogWriter,
    FsyncPolicy,
    GtidLayout,
    MariadbGtids,
    MysqlGtids,
    last_written_key,
)
from cdc import stage_trace
from cdc.binlog.gtid import sid_of
from cdc.config import Config, NodeConfig
from cdc.keys import Checkpoint, GlobalKey, stream_name
from cdc.pauses import BINLOG_DISK_FULL, GMS, SPILL_DISK_FULL, Backoff, Pauses, is_disk_full
from cdc.tasks import cancel_and_wait
from cdc.tso_layout import physical_ms
from dumper.pipeline.metadata import CheckpointTooOld, GmsMetadata, PipelineMetadata
from dumper.pipeline.sources import DnSourceFactory, Source, SourceFactory
from dumper.pipeline.term import Takeover, Term
from dumper.pipeline.txn_encoder import TransactionEncoder, has_spilled
from merge_joint import MergeJoint, Transaction
from merge_source import FragmentKind, NameMap, SourceProcessDied, SpillFull
from topology import FileEntry, TopologyRecord, gms

log = logging.getLogger(__name__)

# A streamed (spilled) transaction goes to the writer in parts of about this many bytes, with
# the event loop free in between (dump clients, lease renewal, status).
STREAM_PART_BYTES = 4 << 20
# A full binlog file system: writing resumes once this much is free (one streamed part: a
# pipeline restart for a few bytes would only fill it again at once).
DISK_FREE_TO_RESUME = STREAM_PART_BYTES
# A checkpoint save slower than this is shown as a GMS pause while it waits (a GMS that stopped
# answering holds it until `cdc.admin_sql.READ_TIMEOUT_S`).
SLOW_SAVE_S = 2.0


class LeaderError(RuntimeError):
    """The pipeline cannot continue; the message names the stage and what to do."""


class DiskFull(RuntimeError):
    """The binlog file system is full: the writer stopped at its last whole transaction."""


@dataclass(slots=True)
class LeaderStats:
    transactions: int = 0
    events: int = 0
    bytes: int = 0
    last_tso: int = 0
    last_commit_at: float = 0.0
    restarts: int = 0  # pipeline restarts after a MergeSource process died
    spilled_bytes: int = 0  # of huge transactions streamed from MergeSource spill files
    started_at: float = field(default_factory=time.monotonic)

    def add(self, transactions: int, events: int, nbytes: int) -> None:
        """Transactions written (or sent to a stream), with their events and bytes."""
        self.transactions += transactions
        self.events += events
        self.bytes += nbytes


class Leader:
    """The pipeline of one leader term. Its dependencies are passed in (defaults: the real
    ones from `config`): `factory` makes each DN's source, `metadata` is the GMS, `writer` the
    binlog files. It owns the set of DNs it merges (`nodes`: the configured ones and those a
    StorageChange added); `service.py` asks it for their addresses. `term`: HA's (its number,
    fence and takeover observer); None for the plain leader."""

    def __init__(
        self,
        config: Config,
        *,
        factory: SourceFactory | None = None,
        metadata: PipelineMetadata | None = None,
        writer: BinlogWriter | None = None,
        nodes: dict[int, NodeConfig] | None = None,
        server_uuid: str | None = None,
        term: Term | None = None,
        pauses: Pauses | None = None,
    ):
        self.config = config
        self.pauses = pauses or Pauses()  # what it waits for now (`cdc status`, the metrics)
        self.metadata: PipelineMetadata = metadata or GmsMetadata(config, self.pauses)
        # A writer of our own can be opened again after a full disk (recovery cuts the torn
        # tail); one passed in (tests) cannot.
        self._own_writer = writer is None
        self._gtids = None if writer is not None else self._gtid_layout(server_uuid)
        self.writer = writer or self._open_writer()
        self.factory: SourceFactory = factory or DnSourceFactory(config, self.metadata.names_at)
        # DN id -> its address; HA passes one dict to every term's Leader, so that a DN added
        # by StorageChange (not in cdc.toml) is known to the next term of this process too.
        self.nodes = nodes if nodes is not None else {n.id: n for n in config.dn}
        self.encoder = TransactionEncoder(
            config.dumper.server_id,
            gtids=self.writer.gtids is not None,
            flavor=self.writer.gtids.flavor if self.writer.gtids else "mysql",
        )
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=config.pipeline.queue_batches)
        self.sources: dict[int, Source] = {}
        self._tasks: dict[int, asyncio.Task] = {}
        self.joint: MergeJoint | None = None
        self.stats = LeaderStats()
        self.written_key: GlobalKey | None = None
        self._file_first_tso: dict[str, int] = {}
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
        # Checkpoints ready but not saved yet (the GMS away): the newest per DN, a bounded queue.
        self._unsaved: dict[int, tuple[GlobalKey, Checkpoint]] = {}

    def _open_writer(self) -> BinlogWriter:
        return open_writer(self.config, self._gtids)

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
        self.written_key = self._last_key()
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
            rotate=self.writer.rotate,
        )
        log.info("leader (term %d): resuming after %s", self.term, self.written_key)

    def _last_key(self) -> GlobalKey | None:
        """The key of the last transaction durably written: the restart resumes after it."""
        return last_written_key(self.writer)

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
        template = next(iter(self.nodes.values()))
        known = self.nodes.get(dn)
        node = NodeConfig(
            id=dn,
            host=entry.get("host", template.host),
            port=int(entry.get("port") or 0) or _known_port(known, dn),
            user=template.user,
            password=template.password,
            name=f"dn{dn}",
        )
        self.nodes.setdefault(dn, node)
        names = self.metadata.names_at(dn, tso) or NameMap(dn)
        # Everything of the new DN up to the marker is history the global binlog never had.
        return self._make(node, None, resume_after=GlobalKey.after_tso(tso), names=names)

    # -- run ----------------------------------------------------------------------------------
    def _gtid_layout(self, server_uuid: str | None) -> GtidLayout:
        """The GTIDs of `[dumper] flavor`: MySQL's, whose sid is the cluster's server_uuid
        from the GMS (`server_uuid` saves the look-up), or MariaDB's in `gtid_domain_id`."""
        d = self.config.dumper
        if d.flavor == "mariadb":
            return gtid_layout(self.config, "")
        return gtid_layout(self.config, server_uuid or self.metadata.server_uuid())

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
                    if not self._own_writer:
                        raise LeaderError(str(exc)) from exc
                    self.writer = await reopen_with_room(
                        self.writer.dir, str(exc), self.pauses, self._open_writer
                    )
                    log.info("restarting the pipeline from the global binlog")
                except (SpillFull, OSError) as exc:
                    if isinstance(exc, OSError) and not is_disk_full(exc):
                        raise  # (a MergeSource in this process: its spill directory is full)
                    await self._wait_for_spill_space(str(exc))
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
            await self.factory.aclose()
            self.close()

    async def _wait_for_spill_space(self, error: str) -> None:
        """Until the spill directory has room again; the pipeline then restarts (the huge
        transaction is read and spilled again)."""
        directory = Path(self.config.pipeline.spill_dir or tempfile.gettempdir())
        self.pauses.begin(SPILL_DISK_FULL, f"{directory}: {error}")
        await asyncio.sleep(0.2)
        await _room(directory, SPILL_DISK_FULL, error, self.pauses, Backoff())
        self.pauses.end(SPILL_DISK_FULL)

    async def _run_pipeline(self) -> None:
        self.sources, self._tasks, self._unsaved = {}, {}, {}
        self.queue = asyncio.Queue(maxsize=self.config.pipeline.queue_batches)
        await self.factory.start()  # e.g. a fork server: overlaps the reads of the GMS below
        await self._before_start()
        await asyncio.to_thread(self.start)
        for dn, source in self.sources.items():
            self._tasks[dn] = asyncio.create_task(source.run(), name=f"merge-source-dn{dn}")
        self._mark("sources started")
        writer_task = asyncio.create_task(self._write_loop(), name="writer")
        cp_task = asyncio.create_task(self._checkpoint_loop(), name="checkpoints")
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

    async def _before_start(self) -> None:
        """What must run on the loop before `start` (the streams of a multi-stream binlog say
        where they end)."""

    async def _write_loop(self) -> None:
        try:
            await self._write_all()
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            # At once, before the loop turns: nobody may be told an end inside the torn tail.
            self.writer.abandon()
            raise DiskFull(
                f"writing {self.writer.dir / self.writer.file} failed: {exc}; stopped at "
                f"position {self.writer.position}"
            ) from exc

    async def _write_all(self) -> None:
        assert self.joint is not None
        writer = self.writer
        fence = self.fence
        async for ready in self.joint.transactions():
            if fence is not None:
                fence()
            batch = EncodedBatch()
            for txn in ready:
                if has_spilled(txn.statements):
                    self._write_batch(batch)
                    await self._write_streamed(txn)
                elif txn.kind is FragmentKind.INSTRUCTION:
                    # nothing to write (MergeJoint applies it, FlushLogs rotates once this
                    # batch is written)
                    continue
                else:
                    batch.add(self.encoder, txn)
            self._write_batch(batch)
            writer.flush()
            self._batch_written(ready)

    def _batch_written(self, ready: list[Transaction]) -> None:
        """`ready` reached the binlog: the written key, the stats, the server's wake-up."""
        if stage_trace.enabled:  # `cdc bench latency`
            for txn in ready:
                stage_trace.stamp("written", txn.tso)
        self.written_key = ready[-1].key
        self.stats.last_tso = ready[-1].tso
        self.stats.last_commit_at = time.time()
        self.notify.set()
        self.notify = asyncio.Event()

    def _write_batch(self, batch: EncodedBatch) -> None:
        """The transactions encoded into `batch` so far, in one writer call; `batch` is then
        empty again."""
        if not batch.ends:
            return
        for file, first in self.writer.append_batch(batch.buf, batch.ends, batch.gtids):
            self._file_first_tso.setdefault(file, batch.tsos[first])
        self.stats.add(len(batch.ends), batch.events, len(batch.buf))
        batch.clear()

    async def _write_streamed(self, txn: Transaction) -> None:
        """A huge transaction, from its spill files to the binlog file part by part: memory
        stays at one part, readers see it only once it is whole (`BinlogWriter.visible_end`)."""
        events = self.encoder.iter_encode(txn)
        if events is None:
            return
        writer = self.writer
        writer.begin_stream(txn.size)
        self._file_first_tso.setdefault(writer.file, txn.tso)
        count = written = 0
        try:
            part: list[bytes] = []
            size = 0
            for e in events:
                part.append(e)
                size += len(e)
                written += len(e)
                if size >= STREAM_PART_BYTES:
                    writer.write_part(part)
                    count += len(part)
                    part, size = [], 0
                    if self.fence is not None:
                        self.fence()
                    await asyncio.sleep(0)
            writer.write_part(part)
            count += len(part)
            writer.end_stream()
        except BaseException:
            writer.abort_stream()
            raise
        log.info("streamed transaction at TSO %d: %d events, %d bytes", txn.tso, count, txn.size)
        self.stats.add(1, count, written)
        self.stats.spilled_bytes += txn.size

    async def _checkpoint_loop(self) -> None:
        """Checkpoints every interval; while the GMS is away they are retried with backoff
        (writing goes on: a restart would only resume from an older checkpoint)."""
        interval = self.config.pipeline.checkpoint_interval_ms / 1000
        backoff = Backoff(first=interval, cap=max(interval, 5.0))
        retry_at = 0.0
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() < retry_at:
                self._collect_checkpoints()  # keeps MergeJoint's lists short meanwhile
                continue
            try:
                await self.persist_checkpoints()
            except gms.UNREACHABLE as exc:
                self.pauses.begin(GMS, f"checkpoints not saved: {exc}")
                retry_at = time.monotonic() + backoff.next()
                continue
            except OSError as exc:  # the fsync before the save
                if not is_disk_full(exc):
                    raise
                self.writer.abandon()
                raise DiskFull(f"syncing {self.writer.dir / self.writer.file}: {exc}") from exc
            if retry_at:
                retry_at = 0.0
                backoff.reset()
            self.pauses.end(GMS)  # (a no-op unless a save failed or was slow)

    def _collect_checkpoints(self) -> None:
        written = self.written_key
        if written is not None and self.joint is not None:
            self._unsaved.update(self.joint.checkpoints_upto(written))

    async def persist_checkpoints(self) -> None:
        """Fsync, then save for each DN the newest checkpoint whose watermark is written.

        The writer is only ever touched from the event loop thread (it is not thread-safe);
        the GMS round trips go to a worker thread. A save that fails leaves them for the next
        one (newer ones replace them).
        """
        self._collect_checkpoints()
        if not self._unsaved:
            return
        self.writer.sync()
        file = self.writer.file
        entry = FileEntry(
            file, self._file_first_tso.get(file), self.stats.last_tso or None, self.writer.position
        )
        await self._save_unsaved(entry)

    async def _save_unsaved(self, entry: FileEntry | None) -> None:
        """Save the checkpoints collected (all they cover is durable by now), on a worker
        thread; those saved leave `_unsaved` (newer ones collected meanwhile stay)."""
        ready = dict(self._unsaved)
        save = asyncio.ensure_future(
            asyncio.to_thread(self.metadata.save_checkpoints, list(ready.values()), entry)
        )
        done, _ = await asyncio.wait([save], timeout=SLOW_SAVE_S)
        if not done:
            self.pauses.begin(GMS, f"saving checkpoints: no answer for {SLOW_SAVE_S:.0f}s")
        await save
        for dn, item in ready.items():
            if self._unsaved.get(dn) is item:
                del self._unsaved[dn]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._may_write():
                self.writer.close()
            else:
                # An HA term that ended (fenced): not even a STOP event. The successor's
                # history goes on from what it copied, and a byte only this copy holds could
                # reach a consumer as a fork.
                self.writer.abandon()
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


def gtid_layout(config: Config, server_uuid: str) -> GtidLayout:
    """The GTIDs of `[dumper] flavor`: MySQL's with `server_uuid` as their sid, or MariaDB's
    in `gtid_domain_id` (`server_uuid` unused)."""
    d = config.dumper
    if d.flavor == "mariadb":
        return MariadbGtids(d.gtid_domain_id, d.server_id)
    return MysqlGtids(sid_of(server_uuid))


def open_writer(config: Config, gtids: GtidLayout | None) -> BinlogWriter:
    """The binlog writer of `config`'s `[dumper]` directory and `[pipeline]` policies."""
    p, d = config.pipeline, config.dumper
    return BinlogWriter(
        d.binlog_dir,
        base=d.binlog_base,
        max_file_size=p.max_file_size_mb * 1024 * 1024,
        fsync=FsyncPolicy.parse(p.fsync),
        server_id=d.server_id,
        server_version=d.version,
        gtids=gtids,
    )


async def reopen_with_room(
    directory: Path, error: str, pauses: Pauses, open_writer: Callable[[], BinlogWriter]
) -> BinlogWriter:
    """After a write to the binlog failed on a full file system (`error`): paused
    (BINLOG_DISK_FULL) until `directory`'s file system has room and `open_writer` opens a
    writer again (its recovery cuts what the failed write left after the last whole
    transaction). The single stream's pipeline and each stream's process (dumper/streams)."""
    pauses.begin(BINLOG_DISK_FULL, f"{directory}: {error}")
    backoff = Backoff()
    while True:
        await _room(directory, BINLOG_DISK_FULL, error, pauses, backoff)
        try:
            writer = await asyncio.to_thread(open_writer)
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            continue
        pauses.end(BINLOG_DISK_FULL)
        return writer


async def _room(directory: Path, reason: str, error: str, pauses: Pauses, backoff: Backoff) -> None:
    """Until `directory`'s file system has `DISK_FREE_TO_RESUME` bytes free."""
    while True:
        await asyncio.sleep(backoff.next())
        free = shutil.disk_usage(directory).free
        if free >= DISK_FREE_TO_RESUME:
            return
        pauses.begin(
            reason,
            f"{directory}: {free} bytes free, resumes at {DISK_FREE_TO_RESUME} ({error})",
        )


class EncodedBatch:
    """Transactions encoded one after the other into one buffer, for `BinlogWriter.append_batch`."""

    __slots__ = ("buf", "ends", "tsos", "gtids", "events")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.buf = bytearray()
        self.ends: list[int] = []  # where each transaction ends in `buf`
        self.tsos: list[int] = []  # its commit TSO
        self.gtids: list[int] = []  # where the GTID events are in `buf` (the writer numbers them)
        self.events = 0

    def add(self, encoder: TransactionEncoder, txn: Transaction) -> None:
        """`txn` encoded at the end of the batch (nothing if it has no event to write)."""
        count = encoder.encode_into(txn, self.buf, self.gtids)
        if count:
            self.ends.append(len(self.buf))
            self.tsos.append(txn.tso)
            self.events += count


def storage_dns(records: list[TopologyRecord]) -> set[int] | None:
    """The storage DNs after the newest topology record (None before the first one)."""
    for rec in reversed(records):
        content = rec.content.get("after", rec.content) if rec.kind == "MetaChange" else rec.content
        if "dns" in content:
            return {int(d["id"]) for d in content["dns"]}
    return None


def joined_at(records: list[TopologyRecord], dn: int) -> int | None:
    """TSO of the StorageChange that added `dn`, if any."""
    for rec in records:
        if rec.kind == "StorageChange" and dn in rec.content.get("added", []):
            return rec.tso
    return None


def leader_status(leader: Leader) -> dict:
    """A JSON-able snapshot for `cdc status` (and for humans reading the status file)."""
    now = time.time()
    dns = []
    problems = []
    for dn, source in sorted(leader.sources.items()):
        status = source.status()
        silent = status.get("silent_s", 0.0)
        if source.error:
            problems.append(f"{source.name}: {source.error}")
        elif silent > leader.config.pipeline.dn_idle_timeout_ms / 1000:
            problems.append(
                f"{source.name} has sent nothing for {silent:.0f}s: the merge waits for it"
            )
        dns.append({"dn": dn, "name": source.name, **status})
    low = leader.joint.merger.low_watermark() if leader.joint else None
    elapsed = max(time.monotonic() - leader.stats.started_at, 1e-6)
    return {
        "written_at": now,
        "last_tso": leader.stats.last_tso,
        "low_watermark_tso": low[0] if low else None,
        "lag_ms": int(now * 1000 - physical_ms(low[0])) if low else None,
        "transactions": leader.stats.transactions,
        "events": leader.stats.events,
        "events_per_s": leader.stats.events / elapsed,
        "restarts": leader.stats.restarts,
        "bytes": leader.stats.bytes,
        "spilled_bytes": leader.stats.spilled_bytes,
        "last_commit_at": leader.stats.last_commit_at,
        "file": leader.writer.file,
        "gno": leader.writer.gno,
        "position": leader.writer.position,
        "dns": dns,
        "problems": problems,
    }


def _known_port(node: NodeConfig | None, dn: int) -> int:
    if node is None:
        raise LeaderError(
            f"dn{dn} joined without a port in its StorageChange and is not configured"
        )
    return node.port
