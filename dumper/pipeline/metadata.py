"""The pipeline's metadata in the GMS (topology): what a start reads (topology records, resume
checkpoints, table names at a TSO) and what the run writes (marker history, checkpoints, the
file index). The pipeline takes it as a dependency: a unit test passes an in-memory one."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import pymysql

from cdc.admin_sql import close_now, retry
from cdc.config import Config
from cdc.keys import Checkpoint, GlobalKey
from cdc.pauses import Pauses
from merge_source import NameMap
from topology import (
    CheckpointHistory,
    CheckpointStore,
    FileEntry,
    FileIndex,
    SchemaHistory,
    SchemaRecord,
    TopologyHistory,
    TopologyRecord,
    gms,
    migrate,
    server_uuid,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

PRUNE_INTERVAL_S = 60.0


class CheckpointTooOld(RuntimeError):
    """No checkpoint of a stream is old enough for the binlog copy to resume from."""


class PipelineMetadata(Protocol):
    """What the pipeline reads and writes besides DN binlogs and its own files. Every method
    may block (a GMS round trip): the pipeline calls them from worker threads."""

    def prepare(self) -> None:
        """Before the first read: the schema is there (migrations)."""

    def server_uuid(self) -> str:
        """The global binlog's server_uuid (the sid of its GTIDs), the same for every dumper."""
        ...

    def topology(self) -> list[TopologyRecord]: ...

    def record_topology(self, record: TopologyRecord) -> object: ...

    def record_schema(self, record: SchemaRecord) -> object: ...

    def resume_checkpoint(self, stream: str, written: GlobalKey | None) -> Checkpoint | None:
        """Where `stream` re-reads its DN from so that nothing after `written` is missed (None:
        from the DN's first binlog); raises CheckpointTooOld when no kept one is old enough."""

    def names_at(self, dn_id: int, tso: int) -> NameMap | None:
        """The physical→logical table names of `dn_id` valid at `tso` (None: unknown)."""

    def save_checkpoints(
        self, ready: list[tuple[GlobalKey, Checkpoint]], entry: FileEntry | None
    ) -> None:
        """Checkpoints (each with the watermark it was taken at) whose watermark is durably
        written, and the current file's index entry (None: the streams of a multi-stream
        binlog index their own files)."""

    def close(self) -> None: ...


class GmsMetadata:
    """`PipelineMetadata` in the GMS database `[pipeline] meta_database`.

    A GMS that went away (restarted, unreachable, stopped) is waited for: each read and each
    marker record is retried with backoff until it succeeds (a pause named in `pauses`), so
    what needs it waits and nothing ends (docs/faults.md). They are idempotent: records are
    `INSERT IGNORE` by TSO. `save_checkpoints` is the exception: it raises, and the pipeline
    keeps the newest checkpoint per DN for the next round (`dumper.pipeline.checkpoints`)."""

    def __init__(self, config: Config, pauses: Pauses | None = None):
        self.config = config
        self.database = config.pipeline.meta_database
        self.migrated = False  # HA: the node migrated the GMS already
        self.pauses = pauses or Pauses()
        self._conn: pymysql.Connection | None = None
        self._cp_conn: pymysql.Connection | None = None
        self._last_prune = 0.0
        self._closed = threading.Event()  # ends the waits of a stopping pipeline

    def _meta(self) -> pymysql.Connection:
        if self._conn is None or not self._conn.open:
            self._conn = gms.connect(self.config.gms)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _retry(self, what: str, call: Callable[[], T]) -> T:
        return retry(call, what, self.pauses, stop=self._closed, on_error=self._drop)

    def prepare(self) -> None:
        if not self.migrated:
            self._retry("migrating the GMS", lambda: migrate(self._meta(), self.database))
            self.migrated = True
        # The checkpoints' connection, opened at the start: its TLS context and login (tens of
        # ms of CPU) are start-up, not a stall of the first checkpoint save (a GMS away now:
        # the first save opens it, or raises and is retried, as after a lost connection).
        with contextlib.suppress(*gms.UNREACHABLE):
            self._checkpoint_conn()

    def _checkpoint_conn(self) -> pymysql.Connection:
        if self._cp_conn is None or not self._cp_conn.open:
            self._cp_conn = gms.connect(self.config.gms)
        return self._cp_conn

    def server_uuid(self) -> str:
        self.prepare()
        return self._retry("reading server_uuid", lambda: server_uuid(self._meta(), self.database))

    def topology(self) -> list[TopologyRecord]:
        return self._retry(
            "reading the topology", lambda: TopologyHistory(self._meta(), self.database).all()
        )

    def record_topology(self, record: TopologyRecord) -> object:
        return self._retry(
            f"recording the {record.kind} marker at TSO {record.tso}",
            lambda: TopologyHistory(self._meta(), self.database).record(record),
        )

    def record_schema(self, record: SchemaRecord) -> object:
        return self._retry(
            f"recording the DDL of {record.db}.{record.table} at TSO {record.tso}",
            lambda: SchemaHistory(self._meta(), self.database).record(record),
        )

    def resume_checkpoint(self, stream: str, written: GlobalKey | None) -> Checkpoint | None:
        """The newest checkpoint taken at a watermark at or below the last written key. The
        single-row table is only a fallback for GMS data written before the history existed."""
        return self._retry(
            f"reading the checkpoint of {stream}", lambda: self._resume_checkpoint(stream, written)
        )

    def _resume_checkpoint(self, stream: str, written: GlobalKey | None) -> Checkpoint | None:
        meta = self._meta()
        history = CheckpointHistory(meta, self.database)
        if not history.has(stream):
            return CheckpointStore(meta, self.database).load(stream)
        if written is None:
            return None  # nothing written here: read the DN from its first binlog again
        cp = history.at_or_below(stream, written)
        if cp is None:
            raise CheckpointTooOld(
                f"{stream}: no checkpoint at or below the last written key {written} "
                f"(kept for [pipeline] checkpoint_history_s = "
                f"{self.config.pipeline.checkpoint_history_s}s): this copy of the global binlog "
                "is too old to resume from"
            )
        return cp

    def names_at(self, dn_id: int, tso: int) -> NameMap | None:
        """The last topology snapshot that holds the table map (a StorageChange only lists
        DNs), then every logical DDL recorded after it."""
        return self._retry(
            f"reading the table names of dn{dn_id}", lambda: self._names_at(dn_id, tso)
        )

    def _names_at(self, dn_id: int, tso: int) -> NameMap | None:
        records = [r for r in self.topology() if r.tso <= tso]
        for record in reversed(records):
            content = record.content.get("after", record.content)
            if "tables" in content:
                break
        else:
            return None
        names = NameMap.from_topology(dn_id, content)
        for ddl in SchemaHistory(self._meta(), self.database).between(record.tso, tso):
            names = names.with_table(ddl.db, ddl.table, (ddl.schema or {}).get("topology"))
        return names

    def save_checkpoints(
        self, ready: list[tuple[GlobalKey, Checkpoint]], entry: FileEntry | None
    ) -> None:
        # Its own connection (marker history is recorded from another worker thread meanwhile),
        # kept open: a new one per second costs a TLS context and a login every time.
        conn = self._checkpoint_conn()
        try:
            store = CheckpointStore(conn, self.database)
            history = CheckpointHistory(conn, self.database)
            prune = time.monotonic() - self._last_prune > PRUNE_INTERVAL_S
            for watermark, cp in ready:
                history.save(watermark, cp)
                store.save(cp)
                if prune:
                    history.prune(cp.stream, self.config.pipeline.checkpoint_history_s)
            if prune:
                self._last_prune = time.monotonic()
            if entry is not None:
                FileIndex(conn, self.database).upsert(entry)
        except BaseException:
            self._cp_conn = None  # reconnect next time; the next round saves them again
            with contextlib.suppress(Exception):
                conn.close()
            raise

    def close(self) -> None:
        self._closed.set()
        for conn in (self._conn, self._cp_conn):
            if conn is not None:
                close_now(conn)  # (a checkpoint save may be blocked reading it)
