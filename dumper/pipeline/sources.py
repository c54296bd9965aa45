"""How the pipeline starts one DN's MergeSource: where in the DN binlog (a checkpoint, or its
first binlog file), with which names and resume key, in this process or in a worker process
forked from a fork server (HA hands in its own, kept running while it followed). The pipeline takes a
`SourceFactory` as a dependency: a unit test passes one that makes fake sources."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from cdc import admin_sql
from cdc.config import Config, NodeConfig
from cdc.keys import ZERO_KEY, Checkpoint, GlobalKey
from cdc.protocol import BinlogPosition, DumpSettings
from merge_source import (
    ForkServer,
    MergeSource,
    NameMap,
    SourceProcess,
    SourceSpec,
    sweep_handoffs,
)

log = logging.getLogger(__name__)


class Source(Protocol):
    """One DN's stream as the pipeline sees it: it feeds fragments and watermarks into the
    queue it was made with until cancelled; `run` raising `SourceProcessDied` restarts the
    pipeline, anything else stops it."""

    name: str
    error: str | None

    async def run(self) -> None: ...

    def status(self) -> dict[str, Any]: ...


class SourceError(RuntimeError):
    """A DN cannot be read from (no binlog); the message says what to check."""


class SourceFactory(Protocol):
    async def start(self) -> None:
        """Before a pipeline start (overlaps the GMS reads): e.g. start a fork server."""

    def prepare(self) -> None:
        """At a pipeline start, before any source is made (blocking: a worker thread)."""

    def make(
        self,
        node: NodeConfig,
        cp: Checkpoint | None,
        queue: asyncio.Queue,
        written: GlobalKey | None,
        resume_after: GlobalKey | None = None,
        names: NameMap | None = None,
    ) -> Source:
        """The source of `node`, reading from `cp` (None: its first binlog, or a DN joining),
        dropping what sorts at or below `written` and `resume_after`. `names` given: the DN
        joins at a StorageChange marker with these names (blocking: a worker thread)."""

    async def aclose(self) -> None: ...


class DnSourceFactory:
    """Sources reading real DNs, as `[pipeline]` says (worker processes or in-process)."""

    def __init__(
        self,
        config: Config,
        names_at: Callable[[int, int], NameMap | None],
        forks: ForkServer | None = None,
    ):
        self.config = config
        self.names_at = names_at
        # MergeSource processes are forked from a pre-imported fork server, shared by the
        # pipeline restarts. Ours unless given one: an HA node's, started while it followed.
        self._own_forks = forks is None
        self.forks = ForkServer() if forks is None else forks

    async def start(self) -> None:
        if self.config.pipeline.source_processes:
            await self.forks.start()  # its imports overlap the reads of the GMS

    def prepare(self) -> None:
        if removed := sweep_handoffs(self.config.pipeline.spill_dir or None):
            log.info("removed %d spill handoff files left by a crash", removed)

    async def aclose(self) -> None:
        if self._own_forks:
            await self.forks.aclose()

    def _dn_start(
        self, node: NodeConfig, cp: Checkpoint | None
    ) -> tuple[BinlogPosition, int, bool]:
        if cp is not None:
            return BinlogPosition(cp.file, cp.position), cp.max_tso_seen, False
        conn = admin_sql.connect(node.host, node.port, node.user, node.password)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                first = cur.fetchone()
        finally:
            conn.close()
        if first is None:
            raise SourceError(f"dn{node.id} ({node.address}) has no binary logs: is log_bin on?")
        return BinlogPosition(first[0], 4), 0, True

    def make(
        self,
        node: NodeConfig,
        cp: Checkpoint | None,
        queue: asyncio.Queue,
        written: GlobalKey | None,
        resume_after: GlobalKey | None = None,
        names: NameMap | None = None,
    ) -> MergeSource | SourceProcess:
        p = self.config.pipeline
        start, max_tso, first_start = self._dn_start(node, cp)
        joining = names is not None  # a DN added by StorageChange: starts at the marker
        name = node.name or f"dn{node.id}"
        if not joining and not first_start and written is not None:
            names = self.names_at(node.id, written.tso)
        written = written or ZERO_KEY
        spec = SourceSpec(
            DumpSettings(
                node.host,
                node.port,
                node.user,
                node.password,
                server_id=p.dump_server_id_base + node.id,
                name=name,
                heartbeat_period=p.dn_heartbeat_ms / 1000,
                idle_timeout=p.dn_idle_timeout_ms / 1000,
            ),
            start,
            node.id,
            name,
            resume_after=max(resume_after or written, written),
            max_tso_seen=max_tso,
            names=names,
            wait_for_start=first_start and not joining,
            spill_bytes=p.spill_mb * 1024 * 1024,
            spill_dir=p.spill_dir or None,
        )
        log.info(
            "%s: reading from %s (%s)", name, start, "first start" if first_start else "checkpoint"
        )
        if p.source_processes:
            return SourceProcess(spec, queue, self.forks)
        return MergeSource.from_spec(spec, queue)
