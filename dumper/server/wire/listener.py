"""The accept loop: one Session task per connection (a client's failure stays in its task), and
a close that ends every session. What sessions answer comes from the `HandlerFactory`."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from cdc.sockets import bound_stream
from dumper.server.handlers import HandlerFactory
from dumper.server.wire.context import WireContext
from dumper.server.wire.session import Session

log = logging.getLogger(__name__)


class Listener:
    def __init__(self, ctx: WireContext, handlers: HandlerFactory) -> None:
        self.ctx = ctx
        self.handlers = handlers
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def listening(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self.ctx.config.port
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._on_client, self.ctx.config.host, self.ctx.config.port, reuse_address=True
        )

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        bound_stream(writer, dead_s=self.ctx.config.client_timeout_s)
        try:
            await Session(self.ctx, reader, writer, self.handlers).run()
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        """Stop accepting, end every session (dumps included) and wait for them."""
        if self._server is not None:
            self._server.close()
        for session in list(self.ctx.sessions.live.values()):
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
