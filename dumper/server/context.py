"""State shared by the server and its sessions (passed in, no globals): config, served files,
schema provider, writer notifier, server variables, live sessions and replica registrations."""

from __future__ import annotations

import itertools
import ssl
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

from cdc.config import ConfigError, DumperConfig, DumperUser
from dumper.server.dump.ack_gate import AckGate
from dumper.server.dump.binlog_sender import BinlogSender
from dumper.server.dump.shared_reads import SharedReads
from dumper.server.holders import holders
from dumper.server.sql.points import PointResolver
from dumper.server.sql.schema import SchemaProvider
from dumper.server.sql.variables import LIVE_VARIABLES, VarValue, server_variables
from dumper.server.store.binlog_files import BinlogFiles
from dumper.server.store.gtid_state import GtidState
from dumper.server.store.mariadb_gtid_state import MariadbGtidState
from dumper.server.store.notifiers import Notifier
from dumper.server.store.retention import Retention, RetentionPolicy
from read_path import TableReads


@dataclass(slots=True)
class Registration:
    """What a COM_REGISTER_SLAVE said (SHOW SLAVE HOSTS)."""

    server_id: int
    host: str
    user: str
    port: int
    master_id: int


@dataclass(slots=True)
class SessionState:
    """Per-connection state the query executor reads and writes."""

    conn_id: int
    host: str
    port: int
    user: DumperUser | None = None
    db: str | None = None
    user_vars: dict[str, VarValue] = field(default_factory=dict)
    session_vars: dict[str, VarValue] = field(default_factory=dict)
    command: str = "Connect"
    since: float = field(default_factory=time.time)
    info: str | None = None
    dump: BinlogSender | None = None  # while a COM_BINLOG_DUMP runs (consumers, retention)
    # Snapshot reads (docs/snapshot-reads.md): inside BEGIN / START TRANSACTION, the global
    # binlog position the transaction reads at, once pinned (WITH CONSISTENT SNAPSHOT or the
    # first read); None outside a transaction (each statement reads at the binlog's end).
    in_transaction: bool = False
    pinned: tuple[str, int] | None = None
    # The position a SELECT over a table reads from while it runs (it scans the binlog from
    # there): retention keeps that file, as it keeps a pinned one (store/retention.py).
    reading: tuple[str, int] | None = None


class SessionHandle(Protocol):
    state: SessionState

    def kill(self) -> None: ...


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    """Server-side TLS; a bad file is a configuration error, reported at start."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"[dumper] tls_cert/tls_key: cannot load {cert!r}: {exc}") from None
    return context


@dataclass(slots=True)
class ServerContext:
    config: DumperConfig
    files: BinlogFiles
    schema: SchemaProvider
    notifier: Notifier
    variables: dict[str, VarValue] = field(default_factory=dict)
    sessions: dict[int, SessionHandle] = field(default_factory=dict)
    replicas: dict[int, Registration] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    tls: ssl.SSLContext | None = None
    # HA follower: its copy only changes by copying the leader (PURGE is refused).
    read_only: Callable[[], bool] = lambda: False
    # HA: followers' acknowledgements, which bound what the leader serves other consumers.
    acks: AckGate | None = None
    # Framed batches shared by dumps at the same place (docs/dumper.md "Many consumers").
    shared_reads: SharedReads = field(default_factory=SharedReads)
    # The global binlog's server_uuid (the cluster's, from the GMS): the sid of its GTIDs.
    # "" = files without GTIDs (tests of the protocol on generated files): GTID_MODE OFF.
    server_uuid: str = ""
    gtid_state: GtidState | None = None
    # The mariadb flavour's GTIDs (`[dumper] flavor = "mariadb"`; then gtid_state is None).
    mariadb_gtids: MariadbGtidState | None = None
    # The read path over the cluster's GMS and DNs, for SELECTs over logical tables
    # (docs/snapshot-reads.md); None: a dumper serving files only (rows are refused).
    reads: TableReads | None = None
    # The purge rule (PURGE BINARY LOGS and the automatic one), over these sessions and acks.
    retention: Retention = field(init=False)
    # Points of AS OF resolved to positions, off the loop, kept (sql/points.py).
    points: PointResolver = field(init=False)

    def __post_init__(self) -> None:
        self.retention = Retention(
            self.files,
            lambda: holders(self.sessions, self.acks),
            RetentionPolicy(self.config.expire_logs_seconds, self.config.max_binlog_total_size),
        )
        self.points = PointResolver(
            self.files, lambda: None if self.reads is None else self.reads.progress.merged_tso()
        )
        if not self.variables:
            self.variables = server_variables(self.config, self.server_uuid)
        if self.config.flavor == "mariadb":
            if self.mariadb_gtids is None:
                self.mariadb_gtids = MariadbGtidState(
                    self.files, self.config.gtid_domain_id, self.config.server_id
                )
        elif self.server_uuid and self.gtid_state is None:
            self.gtid_state = GtidState(self.files, self.server_uuid)
        if self.config.tls_cert and self.tls is None:
            self.tls = tls_context(self.config.tls_cert, self.config.tls_key)

    def next_connection_id(self) -> int:
        return next(self._ids)

    def user(self, name: str) -> DumperUser | None:
        for u in self.config.users:
            if u.name == name:
                return u
        return None

    def live_variables(
        self, names: Collection[str] = LIVE_VARIABLES, upto: tuple[str, int] | None = None
    ) -> dict[str, VarValue]:
        """The variables read from the files at each ask (what GTIDs they hold); of `names`
        only what they need is read (SHOW MASTER STATUS wants gtid_executed alone). `upto`: a
        session's pinned position (a snapshot transaction): the GTIDs as of there."""
        if self.mariadb_gtids is not None:
            return dict(self.mariadb_gtids.variables(upto))  # one read gives all three
        out: dict[str, VarValue] = {}
        if self.gtid_state is not None:
            if "gtid_executed" in names:
                out["gtid_executed"] = str(self.gtid_state.executed(upto))
            if "gtid_purged" in names:
                out["gtid_purged"] = str(self.gtid_state.purged())
        return out
