"""Test helpers: run the Dumper in a background thread (so blocking real clients can talk to it)
and a few small waits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cdc.config import DumperConfig, DumperUser
from cdc.protocol.auth import native_hash
from dumper.server import EventNotifier, InMemorySchemaProvider, Server, serve
from dumper.server.sql.schema import ColumnSchema, TableSchema
from dumper.server.users import sha2_digest

USER, PASSWORD = "repl", "secret"


def make_config(binlog_dir: Path, port: int = 0, **kw) -> DumperConfig:
    users = [
        DumperUser(USER, native_hash(PASSWORD), sha2_digest(PASSWORD)),
        DumperUser("reader", native_hash("pw"), replication=False),
        DumperUser("admin", native_hash("adm"), replication=True, admin=True),
        DumperUser("nopw"),
    ]
    return DumperConfig(port=port, binlog_dir=str(binlog_dir), users=users, **kw)


def schema() -> InMemorySchemaProvider:
    s = InMemorySchemaProvider()
    s.add(
        TableSchema(
            "gbl",
            "t1",
            (
                ColumnSchema("id", "int(11)", nullable=False, key="PRI"),
                ColumnSchema(
                    "name", "varchar(20)", charset="utf8mb4", collation="utf8mb4_general_ci"
                ),
            ),
        )
    )
    return s


class ServerThread:
    """A Dumper on its own event loop in a daemon thread."""

    def __init__(self, binlog_dir: Path, port: int = 0, **config) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.notifier: EventNotifier = self.call(self._make_notifier())
        self.server: Server = self.call(
            serve(make_config(binlog_dir, port, **config), notifier=self.notifier, schema=schema())
        )
        self.port = self.server.port

    @staticmethod
    async def _make_notifier() -> EventNotifier:
        return EventNotifier()

    def call(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def notify(self) -> None:
        self.loop.call_soon_threadsafe(self.notifier.notify)

    def stop(self) -> None:
        self.call(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


async def await_for(predicate: Callable[[], object], timeout: float, what: str) -> object:
    """`wait_for` for async tests: yields to the loop so that our own closes really happen."""
    import asyncio

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Packets:
    """A `PacketSink` for a `BinlogSender` run in a test: it keeps the events of the dump
    packets it is given and checks their sequence ids."""

    def __init__(self) -> None:
        self.events: list[bytes] = []
        self.seq = 1

    def send(self, payload: bytes) -> None:
        assert payload[0] == 0
        self.events.append(bytes(payload[1:]))
        self.seq = (self.seq + 1) & 0xFF

    def send_framed(self, data, seq: int) -> None:
        at = 0
        while at < len(data):
            length = int.from_bytes(data[at : at + 3], "little")
            assert data[at + 3] == self.seq
            self.send(bytes(data[at + 4 : at + 4 + length]))
            at += 4 + length
        assert self.seq == seq

    async def flush(self) -> None:
        pass
