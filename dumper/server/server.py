"""The asyncio accept loop: one Session task per connection (a client's failure stays in its
task), shutdown that closes every session, and `serve()`, the entry point the CLI wires up."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from cdc.config import DumperConfig
from dumper.server.ack_gate import AckGate
from dumper.server.binlog_files import BinlogFiles
from dumper.server.binlog_sender import Notifier, PollNotifier
from dumper.server.consumers import consumers
from dumper.server.context import ServerContext
from dumper.server.retention import Retention, RetentionPolicy
from dumper.server.schema import InMemorySchemaProvider, SchemaProvider
from dumper.server.session import Session

log = logging.getLogger(__name__)


class Server:
    """A started Dumper protocol server; `port` is the bound port (config port 0 = any free)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        cfg = ctx.config
        self.retention = Retention(
            ctx, RetentionPolicy(cfg.expire_logs_seconds, cfg.max_binlog_total_size)
        )

    @property
    def host(self) -> str:
        return self.ctx.config.host

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self.ctx.config.port
        return self._server.sockets[0].getsockname()[1]

    def consumers(self) -> list[dict]:
        """The running dumps (`dumper/server/consumers.py`)."""
        return consumers(self.ctx)

    @property
    def purged(self) -> int:
        """Files purged by retention."""
        return self.retention.purged

    async def start(self) -> Server:
        self._server = await asyncio.start_server(
            self._on_client, self.ctx.config.host, self.ctx.config.port, reuse_address=True
        )
        log.info("dumper serving %s on %s:%d", self.ctx.files.dir, self.ctx.config.host, self.port)
        self.retention.start()
        return self

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await Session(self.ctx, reader, writer).run()
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop accepting, end every session (dumps included) and wait for them."""
        await self.retention.close()
        if self._server is not None:
            self._server.close()
        for session in list(self.ctx.sessions.values()):
            session.kill()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        self._server = None

    async def __aenter__(self) -> Server:
        return self if self._server is not None else await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def serve(
    config: DumperConfig,
    binlog_dir: str | os.PathLike[str] | None = None,
    notifier: Notifier | None = None,
    schema: SchemaProvider | None = None,
    read_only: Callable[[], bool] | None = None,
    acks: AckGate | None = None,
    server_uuid: str = "",
) -> Server:
    """Start serving `binlog_dir` (default `config.binlog_dir`) and return the running Server.
    `server_uuid`: the global binlog's (the sid of the GTIDs in its files); "" for files
    without GTIDs."""
    files = BinlogFiles(Path(binlog_dir or config.binlog_dir), config.binlog_base)
    ctx = ServerContext(
        config=config,
        files=files,
        schema=schema if schema is not None else InMemorySchemaProvider(),
        notifier=notifier or PollNotifier(),
        acks=acks,
        server_uuid=server_uuid,
    )
    if read_only is not None:
        ctx.read_only = read_only
    return await Server(ctx).start()
