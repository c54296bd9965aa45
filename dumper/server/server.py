"""The server assembled: the wire's accept loop (`wire.Listener`) with the handlers of each
session (`sql.QueryExecutor`, `dump.ReplicationAnswers`), retention, and `serve()`, the entry
point the CLI wires up."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from cdc.config import DumperConfig
from dumper.server.context import ServerContext, SessionState
from dumper.server.dump.ack_gate import AckGate
from dumper.server.dump.consumers import consumers
from dumper.server.dump.handler import ReplicationAnswers
from dumper.server.handlers import Handlers
from dumper.server.sql.executor import QueryExecutor
from dumper.server.sql.schema import InMemorySchemaProvider, SchemaProvider
from dumper.server.store.binlog_files import BinlogFiles, check_archive
from dumper.server.store.notifiers import Notifier, PollNotifier
from dumper.server.wire.listener import Listener
from read_path import SnapshotSource, TableReads

log = logging.getLogger(__name__)


class Server:
    """A started Dumper protocol server; `port` is the bound port (config port 0 = any free)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.listener = Listener(ctx, self._handlers)
        self.retention = ctx.retention

    def _handlers(self, state: SessionState) -> Handlers:
        return Handlers(QueryExecutor(self.ctx, state), ReplicationAnswers(self.ctx, state))

    @property
    def host(self) -> str:
        return self.ctx.config.host

    @property
    def port(self) -> int:
        return self.listener.port

    def consumers(self) -> list[dict]:
        """The running dumps (`dumper/server/dump/consumers.py`)."""
        return consumers(self.ctx)

    def consumer_holds(self) -> dict:
        """The named consumers' holds (store/consumer_holds.py) and how many were dropped."""
        holds = self.ctx.consumer_holds
        return {"consumers": holds.report(), "dropped": holds.dropped_total}

    @property
    def purged(self) -> int:
        """Files purged by retention."""
        return self.retention.purged

    async def start(self) -> Server:
        await self.listener.start()
        log.info("dumper serving %s on %s:%d", self.ctx.files.dir, self.ctx.config.host, self.port)
        self.retention.start()
        self.ctx.consumer_holds.start()
        return self

    async def serve_forever(self) -> None:
        if not self.listener.listening:
            await self.start()
        await self.listener.serve_forever()

    async def close(self) -> None:
        """Stop accepting, end every session (dumps included) and wait for them."""
        await self.retention.close()
        await self.listener.close()
        await self.ctx.consumer_holds.close()

    async def __aenter__(self) -> Server:
        return self if self.listener.listening else await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def archive_of(config: DumperConfig, binlog_dir: str | os.PathLike[str] | None) -> Path:
    """Where the purged files of `binlog_dir` go: `[dumper] archive_dir`; an HA peer's in
    `dumper-<id>` of it and a stream's in a directory named as the stream's, since their
    files share names (peers may share a host, and so the path)."""
    path = Path(config.archive_dir)
    if config.peers and config.id:
        path /= f"dumper-{config.id}"
    if config.streams > 1 and binlog_dir:
        path /= Path(binlog_dir).name
    return path


async def serve(
    config: DumperConfig,
    binlog_dir: str | os.PathLike[str] | None = None,
    notifier: Notifier | None = None,
    schema: SchemaProvider | None = None,
    read_only: Callable[[], bool] | None = None,
    acks: AckGate | None = None,
    server_uuid: str = "",
    snapshot: SnapshotSource | None = None,
) -> Server:
    """Start serving `binlog_dir` (default `config.binlog_dir`) and return the running Server.
    `server_uuid`: the global binlog's (the sid of the GTIDs in its files); "" for files
    without GTIDs."""
    archive = None
    if config.archive_dir:
        archive = check_archive(archive_of(config, binlog_dir))
    files = BinlogFiles(Path(binlog_dir or config.binlog_dir), config.binlog_base, archive)
    notifier = notifier or PollNotifier()
    reads = None
    if snapshot is not None:
        reads = TableReads(
            snapshot, files, notifier, config.snapshot_page_rows, config.snapshot_sort_rows
        )
    ctx = ServerContext(
        config=config,
        files=files,
        schema=schema if schema is not None else InMemorySchemaProvider(),
        notifier=notifier,
        acks=acks,
        server_uuid=server_uuid,
        reads=reads,
    )
    if read_only is not None:
        ctx.read_only = read_only
    return await Server(ctx).start()
