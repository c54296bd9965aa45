"""The single stream's `Output`: the global binlog's files, written by one `BinlogWriter` with
one `TransactionEncoder`. A huge (spilled) transaction goes from its spill files to the file
part by part; a full file system stops the writer at its last whole transaction (`DiskFull`)
and `reopen` opens it again there once there is room (docs/faults.md)."""

from __future__ import annotations

import asyncio
import logging

from binlog_writer import (
    BinlogWriter,
    FsyncPolicy,
    GtidLayout,
    MariadbGtids,
    MysqlGtids,
    last_written_key,
)
from cdc.binlog.gtid import sid_of
from cdc.config import Config
from cdc.keys import GlobalKey
from cdc.pauses import Pauses, is_disk_full
from dumper.pipeline.disk_room import reopen_with_room
from dumper.pipeline.encoded_batch import EncodedBatch
from dumper.pipeline.metadata import PipelineMetadata
from dumper.pipeline.output import STREAM_PART_BYTES, DiskFull, Fence, LeaderError
from dumper.pipeline.status import LeaderStats
from dumper.pipeline.txn_encoder import TransactionEncoder, first_spilled
from merge_joint import Transaction
from topology import FileEntry

log = logging.getLogger(__name__)


class BinlogOutput:
    """The binlog files of `config`'s `[dumper]` directory."""

    def __init__(
        self,
        config: Config,
        pauses: Pauses,
        writer: BinlogWriter | None = None,
        gtids: GtidLayout | None = None,
    ):
        """`writer`: a caller's own (tests), which cannot be opened again after a full disk;
        default: one of `config` with `gtids`. `pauses`: where a full disk shows."""
        self.config = config
        self.pauses = pauses
        self._gtids = gtids
        # A writer of our own can be opened again after a full disk (recovery cuts the torn
        # tail); one passed in cannot.
        self._own_writer = writer is None
        self.writer = writer or self._open_writer()
        self.encoder = TransactionEncoder(
            config.dumper.server_id,
            gtids=self.writer.gtids is not None,
            flavor=self.writer.gtids.flavor if self.writer.gtids else "mysql",
        )
        self._file_first_tso: dict[str, int] = {}

    def _open_writer(self) -> BinlogWriter:
        return open_writer(self.config, self._gtids)

    async def prepare(self) -> None:
        pass

    def last_key(self) -> GlobalKey | None:
        return last_written_key(self.writer)

    def rotate(self) -> None:
        try:
            self.writer.rotate()
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            raise self._stopped_writing(exc) from exc

    async def write(
        self, ready: list[Transaction], stats: LeaderStats, fence: Fence | None
    ) -> None:
        try:
            batch = EncodedBatch()
            start, n = 0, len(ready)
            while start < n:
                # The transactions up to a spilled one, encoded in one compiled loop (an
                # INSTRUCTION has nothing to write: MergeJoint applies it, FlushLogs rotates
                # once this batch is written).
                stop = first_spilled(ready, start)
                batch.add_run(self.encoder, ready, start, stop)
                if stop < n:
                    self._write_batch(batch, stats)
                    await self._write_streamed(ready[stop], stats, fence)
                start = stop + 1
            self._write_batch(batch, stats)
            self.writer.flush()
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            raise self._stopped_writing(exc) from exc

    def _stopped_writing(self, exc: OSError) -> DiskFull:
        """A write failed on a full file system: the writer stops at once, before the loop
        turns (nobody may be told an end inside the torn tail)."""
        self.writer.abandon()
        return DiskFull(
            f"writing {self.writer.dir / self.writer.file} failed: {exc}; stopped at "
            f"position {self.writer.position}"
        )

    def _write_batch(self, batch: EncodedBatch, stats: LeaderStats) -> None:
        """The transactions encoded into `batch` so far, in one writer call; `batch` is then
        empty again."""
        if not batch.ends:
            return
        for file, first in self.writer.append_batch(batch.buf, batch.ends, batch.gtids):
            self._file_first_tso.setdefault(file, batch.tsos[first])
        stats.add(len(batch.ends), batch.events, len(batch.buf))
        batch.clear()

    async def _write_streamed(
        self, txn: Transaction, stats: LeaderStats, fence: Fence | None
    ) -> None:
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
                    if fence is not None:
                        fence()
                    await asyncio.sleep(0)
            writer.write_part(part)
            count += len(part)
            writer.end_stream()
        except BaseException:
            writer.abort_stream()
            raise
        log.info("streamed transaction at TSO %d: %d events, %d bytes", txn.tso, count, txn.size)
        stats.add(1, count, written)
        stats.spilled_bytes += txn.size

    def checkpoint_round(self, merged_tso: int) -> None:
        pass

    async def sync(self, stats: LeaderStats) -> FileEntry:
        """The writer is only ever touched from the event loop thread (it is not
        thread-safe)."""
        try:
            self.writer.sync()
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            self.writer.abandon()
            raise DiskFull(f"syncing {self.writer.dir / self.writer.file}: {exc}") from exc
        file = self.writer.file
        return FileEntry(
            file, self._file_first_tso.get(file), stats.last_tso or None, self.writer.position
        )

    async def reopen(self, error: DiskFull) -> None:
        if not self._own_writer:
            raise LeaderError(str(error)) from error
        self.writer = await reopen_with_room(
            self.writer.dir, str(error), self.pauses, self._open_writer
        )

    def end(self) -> tuple[str, int, int]:
        return self.writer.file, self.writer.gno, self.writer.position

    def close(self, may_write: bool) -> None:
        if may_write:
            self.writer.close()
        else:
            # An HA term that ended (fenced): not even a STOP event. The successor's history
            # goes on from what it copied, and a byte only this copy holds could reach a
            # consumer as a fork.
            self.writer.abandon()

    async def aclose(self, may_write: bool) -> None:
        pass


def gtids_of(config: Config, server_uuid: str | None, metadata: PipelineMetadata) -> GtidLayout:
    """The GTIDs of `[dumper] flavor`: MySQL's, whose sid is the cluster's server_uuid from
    the GMS (`server_uuid` saves the look-up), or MariaDB's in `gtid_domain_id`."""
    if config.dumper.flavor == "mariadb":
        return gtid_layout(config, "")
    return gtid_layout(config, server_uuid or metadata.server_uuid())


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
