"""The server assembled: the wire's accept loop (`wire.Listener`) with the handlers of each
session (`sql.QueryExecutor`, `dump.ReplicationAnswers`), retention, and `serve()`, the entry
point the CLI wires up."""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable
from pathlib import Path

from cdc.config import ConfigError, DumperConfig
from cdc.streams import archive_of
from dumper.server.dump.ack_gate import AckGate
from dumper.server.dump.consumers import consumers
from dumper.server.dump.handler import DumpContext, ReplicationAnswers
from dumper.server.handlers import Handlers
from dumper.server.holders import dumps_seen, holders
from dumper.server.sessions import Sessions, SessionState
from dumper.server.sql.answers import SqlContext
from dumper.server.sql.executor import QueryExecutor
from dumper.server.sql.points import PointResolver
from dumper.server.sql.schema import InMemorySchemaProvider, SchemaProvider
from dumper.server.sql.variables import server_variables
from dumper.server.store.binlog_files import BinlogFiles, check_archive
from dumper.server.store.change_index import ChangeIndexes
from dumper.server.store.consumer_holds import ConsumerHolds
from dumper.server.store.notifiers import Notifier, PollNotifier
from dumper.server.store.peer_holds import PeerHolds
from dumper.server.store.retention import Retention, RetentionPolicy
from dumper.server.store.served import ServedBinlog
from dumper.server.wire.context import WireContext
from dumper.server.wire.listener import Listener
from read_path import SnapshotSource, TableReads

log = logging.getLogger(__name__)


class Server:
    """A started Dumper protocol server; `port` is the bound port (config port 0 = any free).
    Each part is handed what it needs: the wire its `WireContext`, the SQL answers their
    `SqlContext`, the replication side its `DumpContext`; they share the served files
    (`store`), the live sessions and the purge rule, and nothing reaches through another."""

    def __init__(
        self,
        config: DumperConfig,
        served: ServedBinlog,
        schema: SchemaProvider,
        acks: AckGate | None = None,
        reads: TableReads | None = None,
        read_only: Callable[[], bool] = lambda: False,
        change_index: ChangeIndexes | None = None,
    ) -> None:
        self.config = config
        # Built off the loop as the files grow; the reads as of old points use it.
        self.change_index = change_index
        self.served = served
        self.sessions = Sessions()
        self.acks = acks
        # Named consumers' holds while they are away (docs/retention.md), part of the purge rule.
        # With HA peers, also the consumers connected to the others (store/peer_holds.py).
        self.peer_holds = PeerHolds(config)
        self.holds = ConsumerHolds(
            served.files,
            config,
            lambda: dumps_seen(self.sessions.live, acks),
            remote=self.peer_holds.seen,
        )
        self.retention = Retention(
            served.files,
            lambda: holders(self.sessions.live, acks) + self.holds.holders(),
            RetentionPolicy(config.expire_logs_seconds, config.max_binlog_total_size),
        )
        self.dump = DumpContext(config, served, acks)
        variables = server_variables(config, served.server_uuid)
        self.sql = SqlContext(
            config,
            served,
            schema,
            variables,
            self.sessions,
            self.dump.replicas,
            self.retention,
            self.holds,
            PointResolver(
                served.files, lambda: None if reads is None else reads.progress.merged_tso()
            ),
            reads,
            read_only,
        )
        tls = tls_context(config.tls_cert, config.tls_key) if config.tls_cert else None
        self.listener = Listener(WireContext(config, self.sessions, variables, tls), self._handlers)

    def _handlers(self, state: SessionState) -> Handlers:
        return Handlers(QueryExecutor(self.sql, state), ReplicationAnswers(self.dump, state))

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def port(self) -> int:
        return self.listener.port

    def consumers(self) -> list[dict]:
        """The running dumps (`dumper/server/dump/consumers.py`)."""
        return consumers(self.sessions.live, self.served.files, self.acks)

    def consumer_holds(self) -> dict:
        """The named consumers' holds (store/consumer_holds.py) and how many were dropped."""
        holds = self.holds
        return {"consumers": holds.report(), "dropped": holds.dropped_total}

    @property
    def purged(self) -> int:
        """Files purged by retention."""
        return self.retention.purged

    async def start(self) -> Server:
        await self.listener.start()
        log.info("dumper serving %s on %s:%d", self.served.files.dir, self.config.host, self.port)
        self.retention.start()
        self.holds.start()
        if self.holds.enabled:
            self.peer_holds.start()
        if self.change_index is not None:
            self.change_index.start(self.served.notifier)
        return self

    async def serve_forever(self) -> None:
        if not self.listener.listening:
            await self.start()
        await self.listener.serve_forever()

    async def close(self) -> None:
        """Stop accepting, end every session (dumps included) and wait for them."""
        await self.retention.close()
        await self.listener.close()
        await self.peer_holds.close()
        await self.holds.close()
        if self.change_index is not None:
            await self.change_index.close()

    async def __aenter__(self) -> Server:
        return self if self.listener.listening else await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """Server-side TLS; a bad file is a configuration error, reported at start."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"[dumper] tls_cert/tls_key: cannot load {cert!r}: {exc}") from None
    return context


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
    served = ServedBinlog.of(config, files, notifier or PollNotifier(), server_uuid)
    reads = index = None
    if snapshot is not None:
        index = ChangeIndexes(files)
        reads = TableReads(
            snapshot,
            files.readable(),
            served.notifier,
            config.snapshot_page_rows,
            config.snapshot_sort_rows,
            index,
        )
    server = Server(
        config,
        served,
        schema if schema is not None else InMemorySchemaProvider(),
        acks=acks,
        reads=reads,
        read_only=read_only or (lambda: False),
        change_index=index,
    )
    return await server.start()
