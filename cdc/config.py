"""The one typed configuration object, loaded from `cdc.toml` (stdlib tomllib).

Every package receives the parts it needs from here; nothing reads the file twice. Unknown keys
are an error, not a silent default: a typo in `cdc.toml` should never change behaviour quietly.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

T = TypeVar("T")


class ConfigError(ValueError):
    """`cdc.toml` is missing, unreadable or has a wrong key or value."""


@dataclass(slots=True)
class NodeConfig:
    """One MariaDB server: the meta database (GMS) or a data node (DN)."""

    id: int
    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = ""
    server_id: int = 0
    name: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(slots=True)
class ClusterConfig:
    """Where the local cluster tooling keeps its state (data dirs, pids, logs)."""

    dir: str = "var/cluster"


@dataclass(slots=True)
class CnConfig:
    """The reference compute node."""

    server_id: int = 1
    heartbeat_interval_ms: int = 200
    # TSOs persisted ahead in GMS: a restart skips at most this many milliseconds of TSO space.
    tso_window_ms: int = 3000
    meta_database: str = "cdc_meta"
    # Where the CN writes its ground-truth commit log (tests only); empty: off.
    ground_truth_log: str = ""
    # GMS database of the CN catalogue and TSO row (docs/cn.md). Was `catalog_database`, which
    # is still read (RENAMED_KEYS).
    catalogue_database: str = "cn_catalog"
    # Commit records (and recovery tombstones) older than this are purged from the DNs.
    commit_record_retention_s: int = 600
    # How often the heartbeat task purges old commit records.
    purge_interval_s: int = 60
    # Fewer round trips: XA START rides with a branch's first statement, XA END with XA
    # PREPARE (multi-statement packets), and the commit records of concurrent transactions on
    # a DN share one INSERT (record_batch.py). false: one statement per round trip, one INSERT
    # per record (`cdc bench cn` compares the two).
    batch_round_trips: bool = True
    # Several CN processes (docs/cn.md): each renews its GMS lease every sync interval and polls
    # the catalogue version; a CN silent for lease_ms is counted dead (changes stop waiting for
    # it); a change fails, naming the CN, if a live one does not acknowledge within
    # change_timeout_ms.
    sync_interval_ms: int = 100
    lease_ms: int = 3000
    change_timeout_ms: int = 30000


@dataclass(slots=True)
class DumperUser:
    """A user of the Dumper's MySQL protocol server."""

    name: str
    # mysql_native_password hash as MySQL's PASSWORD(): "*" + 40 hex digits; "" = no password.
    password_hash: str = ""
    # Optional caching_sha2_password fast-auth digest: hex(SHA256(SHA256(password))).
    sha2_digest: str = ""
    # COM_BINLOG_DUMP / COM_REGISTER_SLAVE allowed (REPLICATION SLAVE).
    replication: bool = True
    # PURGE BINARY LOGS and KILL of other users' connections allowed.
    admin: bool = False
    # Reading rows of logical tables (docs/snapshot-reads.md): true = every database, or a list
    # of databases; default none.
    select: bool | list[str] = False

    def __post_init__(self) -> None:
        if not isinstance(self.select, bool) and not (
            isinstance(self.select, list) and all(isinstance(d, str) for d in self.select)
        ):
            raise ConfigError(
                f"[[dumper.users]] {self.name!r}: select = true, false or a list of database "
                f"names, got {self.select!r}"
            )


@dataclass(slots=True)
class DumperPeer:
    """One dumper process of an HA group (docs/dumper.md, "High availability")."""

    id: int
    host: str = "127.0.0.1"
    port: int = 0
    # Each peer keeps its own copy of the global binlog (same file names, same bytes).
    binlog_dir: str = ""
    # Its metrics endpoint; 0 = [dumper] metrics_port + id - 1 when that is set (peers may
    # share a host; with several streams + (id - 1) * (streams + 1)), else none.
    metrics_port: int = 0


@dataclass(slots=True)
class DumperConsumer:
    """A consumer whose unread files the dumper keeps, even while it is disconnected, up to its
    caps (docs/retention.md): known by the server_uuid its dump sets (`@replica_uuid` or
    `@slave_uuid`) or else by its dump's server_id."""

    name: str
    server_id: int = 0
    server_uuid: str = ""
    # The hold is dropped (loudly: log, `cdc status`, a metric) once the consumer is this many
    # bytes behind the end of the files, or has not read for this many seconds.
    max_hold_bytes: int = 64 << 30
    max_hold_s: int = 7 * 86400

    def __post_init__(self) -> None:
        where = f"[[dumper.consumers]] {self.name!r}"
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_.:@-]{1,64}", self.name):
            raise ConfigError(f"{where}: name must be 1-64 of A-Z a-z 0-9 _ . : @ -")
        if not self.server_id and not self.server_uuid:
            raise ConfigError(f"{where}: set server_id or server_uuid (how its dump is known)")
        if not 0 <= self.server_id < 1 << 32:
            raise ConfigError(f"{where}: server_id = {self.server_id}: must be in 0..2**32-1")
        check_hold_caps(where, self.max_hold_bytes, self.max_hold_s)


def check_hold_caps(where: str, max_bytes: int, max_s: int, prefix: str = "") -> None:
    """A hold's caps must bound it: a cap of 0 or less would keep files forever (or never)."""
    for name, value in ((f"{prefix}max_hold_bytes", max_bytes), (f"{prefix}max_hold_s", max_s)):
        if isinstance(value, bool) or not 0 < value <= 1 << 62:
            raise ConfigError(f"{where}: {name} = {value}: must be > 0 (a cap in bytes/seconds)")


FLAVORS = ("mysql", "mariadb")
MYSQL_VERSION = "5.7.44-cdc-log"
MARIADB_VERSION = "10.11.19-MariaDB-cdc-log"


@dataclass(slots=True)
class DumperConfig:
    """The Dumper's MySQL protocol server (docs/dumper.md)."""

    host: str = "127.0.0.1"
    port: int = 3307
    server_id: int = 100
    # What the files and the server look like (docs/dumper.md, "Flavours"): "mysql" (MySQL 5.7
    # files with MySQL GTIDs) or "mariadb" (MariaDB 10.11 files with MariaDB GTIDs, for MariaDB
    # replicas that follow with MASTER_USE_GTID=slave_pos).
    flavor: str = "mysql"
    # The domain of the mariadb flavour's GTIDs (domain-server_id-seq_no; server_id is ours).
    gtid_domain_id: int = 0
    # mysql: must start with "5." so that mariadb-binlog and MariaDB replicas accept us;
    # mariadb: a MariaDB 10.x/11.x version ("-MariaDB" in it). The other flavour's default is
    # swapped for this one's, so switching `flavor` alone is enough.
    version: str = MYSQL_VERSION
    binlog_dir: str = "var/binlog"
    binlog_base: str = "binlog"
    # Heartbeat period (ms) for dump clients that set no @master_heartbeat_period; 0 = none.
    default_heartbeat_ms: int = 0
    # How often a blocking dump re-checks the active file when no writer notifies it (ms).
    poll_interval_ms: int = 200
    # Logged-in connections; one more is kept for an `admin` user, as MySQL keeps one for SUPER
    # (CONNECTION_ADMIN), so that an administrator can still log in to KILL the others.
    max_connections: int = 256
    # Connections still in the handshake/login at once: more are refused (1040) at accept, so a
    # flood of silent sockets cannot hold every slot (each also ends after connect_timeout).
    max_unauthenticated_connections: int = 64
    # Seconds a client has for the handshake and login (MySQL's connect_timeout).
    connect_timeout: int = 10
    # Seconds an idle logged-in connection is kept (MySQL's wait_timeout; a session may SET its
    # own). A connection in a binlog dump is never idle.
    wait_timeout: int = 28800
    # A connection idle this long inside a (read-only) transaction is closed, as MariaDB's
    # variable of that name does: its pinned snapshot holds binlog files from purge
    # (docs/snapshot-reads.md, "What a snapshot holds"). Seconds; sessions may SET it.
    idle_readonly_transaction_timeout: int = 600
    # The largest command a client may send, in bytes (@@max_allowed_packet reports it): a longer
    # one gets ERR 1153 before it is buffered and the connection is closed, as in MySQL. 16 MiB
    # is MariaDB 10.11's default; every statement clients send is far smaller.
    max_allowed_packet: int = 16 << 20
    # Run the protocol server (sessions, SQL, dump senders) in its own process reading the
    # files, so that no client can stall MergeJoint and the writer (docs/dumper.md, "Serving
    # cannot stall writing"). False: on the leader's event loop, as before.
    serve_process: bool = True
    # TLS on the dumper port (clients upgrade with the MySQL SSL request): PEM certificate and
    # key files; both empty = no TLS offered.
    tls_cert: str = ""
    tls_key: str = ""
    users: list[DumperUser] = field(default_factory=list)
    # SELECT over a logical table reads each shard in pages of this many rows (docs/
    # snapshot-reads.md): a statement holds at most one page per shard; larger pages mean fewer
    # watermark waits (one per chunk).
    snapshot_page_rows: int = 10000
    # An ORDER BY other than the primary key holds the statement's rows in memory to sort them
    # (a LIMIT: only offset + limit of them); past this many it fails with 1038 (docs/
    # snapshot-reads.md, "ORDER BY").
    snapshot_sort_rows: int = 100000
    # HA: every dumper process of the cluster; empty = a single dumper without a lease.
    # `cdc start --dumper-id N` runs peer N (its host, port and binlog_dir replace the above).
    peers: list[DumperPeer] = field(default_factory=list)
    # Which peer this process is (set from --dumper-id; 0 = no HA).
    id: int = 0
    # Leader lease in the GMS: held for lease_ms, renewed every lease_renew_ms. A leader that
    # could not renew for lease_ms (minus a margin) stops writing before anyone may take over.
    lease_ms: int = 5000
    lease_renew_ms: int = 1000
    # The account followers use to copy the leader's files (a [[dumper.users]] entry with
    # `replication`; the plain password is needed to log in).
    peer_user: str = "repl"
    peer_password: str = ""
    # HA: the leader serves consumers other than followers only what a follower acknowledged
    # holding durably (semi-sync style; docs/dumper.md "The leader-consumer gap"), so that a
    # consumer re-pointed at the next leader after a takeover finds the same bytes. False:
    # serve all that is written (lower latency; such a consumer may then break). No peers: off.
    serve_acknowledged_only: bool = True
    # How long a dump of the leader waits for an acknowledgement before it serves anyway and
    # the leader stops waiting (one warning) until followers acknowledged what it served (ms).
    ack_wait_ms: int = 1000
    # A candidate whose copy ends before how far the last leader's degraded gate served (its
    # recorded bound: docs/dumper.md "A degraded gate's bound") waits for a member holding that
    # far, by default for ever (0): its term would fork the history those consumers read.
    # > 0: after the lease was free this many seconds it takes over anyway (an ERROR line).
    degraded_takeover_after_s: float = 0.0
    # A client connection whose host vanished (a cut link: no FIN, no RST), or that left what
    # was sent to it unread this long, is ended and its session, dump and retention hold freed
    # (seconds; MySQL's net_write_timeout is 60). Keepalives find a quiet dead client too.
    client_timeout_s: float = 60.0
    # Retention (docs/dumper.md "Retention"): files older than this many seconds (by their last
    # write) are purged automatically; 0 = kept until PURGE BINARY LOGS. Never the active file,
    # nor a file a connected consumer or a live HA follower still reads (held until they pass it).
    expire_logs_seconds: int = 0
    # Purge the oldest files while all of them together exceed this many bytes (MariaDB's
    # max_binlog_total_size); 0 = no limit. The same files are held as above.
    max_binlog_total_size: int = 0
    # Consumers whose unread files are kept while they are away, up to caps (docs/retention.md).
    consumers: list[DumperConsumer] = field(default_factory=list)
    # Also hold for any other dump that names itself (a server_uuid, else a server_id > 0),
    # remembered across restarts, with the caps below.
    register_consumers: bool = False
    consumer_max_hold_bytes: int = 16 << 30
    consumer_max_hold_s: int = 86400
    # Purged files are moved here (another disk, say) instead of deleted; dumps still read
    # them (docs/retention.md, "Archive"). "" = deleted. The operator prunes the archive.
    archive_dir: str = ""
    # Prometheus metrics of the dumper (docs/dumper.md "Metrics") on this port of `host`;
    # 0 = no metrics endpoint.
    metrics_port: int = 0
    # Multi-stream (docs/streams.md): the merged order split into this many binlog streams,
    # each a complete binlog server of its own (own port, files, server_uuid, GTIDs). 1: one
    # global binlog, served on `port` (no stream processes).
    streams: int = 1
    # What is hashed to pick a table's stream: "table" (`db.table`) or "database" (`db`: the
    # tables of a database stay together).
    stream_by: str = "table"
    # Stream i listens on stream_port + i; 0 = port + 1 + i (`port` answers SHOW BINARY STREAMS).
    stream_port: int = 0
    # Pinned tables: "db.table" (or "db") = stream, winning over the hash (keep tables that
    # share transactions in one stream: a transaction is whole only within a stream).
    stream_tables: dict[str, int] = field(default_factory=dict)
    # Streams whose process runs on another host (docs/streams.md, "A stream on another host"):
    # "i" = "HOST:PORT" where `cdc stream serve --stream i` listens; the merge connects there
    # instead of starting the process. Not with [[dumper.peers]].
    stream_addresses: dict[str, str] = field(default_factory=dict)
    # The shared secret both ends of a stream's TCP link prove they hold (HMAC, never sent);
    # required with stream_addresses. The link is not encrypted: across hosts, put it on a
    # private network or a TLS tunnel.
    stream_secret: str = ""

    def __post_init__(self) -> None:
        # The client-facing bounds (issue 19): a value outside these ranges would disable one
        # (a zero timeout closes every connection, a huge packet limit buffers anything).
        for name, low, high in (
            ("max_allowed_packet", 1024, 1 << 30),  # MySQL's range
            ("connect_timeout", 2, 31536000),
            ("wait_timeout", 1, 31536000),
            ("max_connections", 1, 100000),
            ("max_unauthenticated_connections", 1, 100000),
            ("expire_logs_seconds", 0, 1 << 40),
            ("max_binlog_total_size", 0, 1 << 62),
            ("metrics_port", 0, 65535),
            ("streams", 1, 1024),
            ("stream_port", 0, 65535),
        ):
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"[dumper] {name} = {value}: must be in {low}..{high}")
        check_hold_caps(
            "[dumper]", self.consumer_max_hold_bytes, self.consumer_max_hold_s, "consumer_"
        )
        named: set[str] = set()
        for c in self.consumers:
            if c.name in named:
                raise ConfigError(f"[[dumper.consumers]] {c.name!r}: named twice")
            named.add(c.name)
        if self.stream_by not in ("table", "database"):
            raise ConfigError(
                f"[dumper] stream_by = {self.stream_by!r}: must be 'table' or 'database'"
            )
        for name, stream in self.stream_tables.items():
            if isinstance(stream, bool) or not isinstance(stream, int):
                raise ConfigError(f"[dumper.stream_tables] {name!r}: expected a stream number")
            if not 0 <= stream < self.streams:
                raise ConfigError(
                    f"[dumper.stream_tables] {name!r} = {stream}: must be in "
                    f"0..{self.streams - 1} ([dumper] streams = {self.streams})"
                )
        if self.streams > 1 and self.peers:
            self._check_stream_peers()
        if self.stream_addresses:
            self._check_stream_addresses()
        if self.flavor not in FLAVORS:
            raise ConfigError(f"[dumper] flavor = {self.flavor!r}: must be one of {FLAVORS}")
        if not 0 <= self.gtid_domain_id < 1 << 32:
            raise ConfigError(
                f"[dumper] gtid_domain_id = {self.gtid_domain_id}: must be in 0..2**32-1"
            )
        mariadb = self.flavor == "mariadb"
        if self.version == (MYSQL_VERSION if mariadb else MARIADB_VERSION):
            self.version = MARIADB_VERSION if mariadb else MYSQL_VERSION
        major = self.version.split(".", 1)[0]
        if mariadb and (major not in ("10", "11") or "-MariaDB" not in self.version):
            raise ConfigError(
                f"[dumper] version = {self.version!r}: the mariadb flavour needs a MariaDB "
                f"10.x/11.x version like {MARIADB_VERSION!r} (MariaDB replicas decide from it)"
            )
        if not mariadb and major != "5":
            raise ConfigError(
                f"[dumper] version = {self.version!r}: the mysql flavour needs a 5.x version "
                f"like {MYSQL_VERSION!r} (mariadb-binlog and MariaDB replicas refuse 8.x)"
            )

    def _check_stream_peers(self) -> None:
        """Several streams with HA peers (docs/streams.md, "HA followers"): each dumper's
        stream i listens on its own port + 1 + i, where its followers find it."""
        if self.stream_port:
            raise ConfigError(
                f"[dumper] stream_port = {self.stream_port} with [[dumper.peers]]: each dumper's "
                "stream i listens on that dumper's port + 1 + i; leave stream_port at 0"
            )
        ranges = sorted((p.host, p.port, p.id) for p in self.peers)
        for (host, port, pid), (host2, port2, pid2) in zip(ranges, ranges[1:], strict=False):
            if host == host2 and port2 <= port + self.streams:
                raise ConfigError(
                    f"[[dumper.peers]] {pid} and {pid2} on {host}: ports {port} and {port2} "
                    f"overlap; each dumper needs {self.streams + 1} ports (its own, then one "
                    "per stream)"
                )

    def _check_stream_addresses(self) -> None:
        for key, address in self.stream_addresses.items():
            where = f"[dumper.stream_addresses] {key!r}"
            if not key.isdigit() or not 0 <= int(key) < self.streams:
                raise ConfigError(
                    f"{where}: expected a stream number in 0..{self.streams - 1} "
                    f"([dumper] streams = {self.streams})"
                )
            host_port(address, where)
        if len(self.stream_secret) < 16:
            raise ConfigError(
                "[dumper] stream_addresses needs stream_secret (16 characters or more, the same "
                "on every host): it keeps a stranger from feeding or impersonating a stream"
            )
        if self.peers:
            raise ConfigError(
                "[dumper] stream_addresses with [[dumper.peers]]: remote streams of an HA "
                "group are not built (docs/streams.md)"
            )


def host_port(address: str, where: str = "address") -> tuple[str, int]:
    """`HOST:PORT` (`[v6addr]:PORT` for IPv6) as (host, port)."""
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where} = {address!r}: expected HOST:PORT, e.g. 10.0.0.2:7000")
    return host, int(port)


@dataclass(slots=True)
class PipelineConfig:
    """MergeSources, MergeJoint and the global binlog writer (run by the Dumper leader)."""

    # GMS database of the CDC's own tables (topology history, checkpoints, file index).
    meta_database: str = "cdc_meta"
    max_file_size_mb: int = 512
    # binlog_writer fsync policy: txn | never | group:N | interval:MS
    fsync: str = "interval:100"
    # DN dump clients register as server_id base + dn id (must not clash with real replicas).
    dump_server_id_base: int = 9100
    # Heartbeat period the DNs are asked for on the dump connections (ms).
    dn_heartbeat_ms: int = 1000
    # A DN silent for this long (no event, no heartbeat) is reconnected (ms).
    dn_idle_timeout_ms: int = 10000
    # Bound of the queue between the MergeSources and MergeJoint (in batches): backpressure.
    queue_batches: int = 256
    # How often per-DN checkpoints are persisted in the GMS (ms).
    checkpoint_interval_ms: int = 1000
    # Checkpoints are also kept keyed by watermark for this long (HA: a follower that takes
    # over behind the old leader resumes from an older one); the newest is always kept.
    checkpoint_history_s: int = 3600
    # A DN transaction (binlog group) larger than this is held in a temp file, not in memory.
    spill_mb: int = 64
    # Where spill files go ("": the system temp dir).
    spill_dir: str = ""
    # Each MergeSource in its own process, forked from a pre-imported fork server
    # (merge_source/fork_server.py; the GIL would otherwise put every DN and the writer on one
    # core); false: all in the leader's process (tests, debugging).
    source_processes: bool = True
    # A MergeSource process that dies (killed, crashed) restarts the pipeline from the global
    # binlog and the checkpoints; more restarts than this within a minute stop the leader.
    max_restarts_per_minute: int = 5


@dataclass(slots=True)
class Config:
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    gms: NodeConfig = field(default_factory=lambda: NodeConfig(id=0, name="gms"))
    dn: list[NodeConfig] = field(default_factory=list)
    cn: CnConfig = field(default_factory=CnConfig)
    dumper: DumperConfig = field(default_factory=DumperConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)

    def dn_by_id(self, dn_id: int) -> NodeConfig:
        for node in self.dn:
            if node.id == dn_id:
                return node
        raise ConfigError(
            f"no DN with id {dn_id} in the configuration (have {[d.id for d in self.dn]})"
        )

    def for_dumper(self, dumper_id: int) -> Config:
        """This configuration as run by HA peer `dumper_id`: its address and binlog directory."""
        peer = next((p for p in self.dumper.peers if p.id == dumper_id), None)
        if peer is None:
            raise ConfigError(
                f"no [[dumper.peers]] entry with id {dumper_id} "
                f"(have {[p.id for p in self.dumper.peers]})"
            )
        if peer.port <= 0:
            raise ConfigError(
                f"[[dumper.peers]] id {dumper_id}: port must be set (followers connect to it)"
            )
        dumper = dataclasses.replace(
            self.dumper,
            id=dumper_id,
            host=peer.host,
            port=peer.port,
            binlog_dir=peer.binlog_dir or f"{self.dumper.binlog_dir}-{dumper_id}",
            metrics_port=peer.metrics_port or self._peer_metrics_port(dumper_id),
        )
        return dataclasses.replace(self, dumper=dumper)

    def _peer_metrics_port(self, dumper_id: int) -> int:
        """Peer `dumper_id`'s default metrics port: [dumper] metrics_port + id - 1, or with
        several streams + (id - 1) * (streams + 1), since each stream's process takes the
        dumper's metrics port + 1 + stream (cdc/streams.py); 0 when metrics are off."""
        d = self.dumper
        if not d.metrics_port:
            return 0
        return d.metrics_port + (dumper_id - 1) * (d.streams + 1 if d.streams > 1 else 1)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(
            "# Written by `cdc cluster up`, which rewrites [cluster], [gms] and [[dn]] and keeps the\n"
            "# rest. Unknown keys are rejected.\n" + tomli_w.dumps(self.to_dict())
        )


def load(path: str | Path) -> Config:
    """Read `cdc.toml`; errors name the file and the offending key."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found (run `cdc cluster up` to create one)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return from_dict(Config, raw)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


# Keys an earlier version knew: "section.key" -> (the value that asks for what now always
# happens, what became of the key). `cluster up` writes every key, so an old cdc.toml sets them
# though nobody chose them: that value is dropped quietly; any other is an error that says why,
# rather than "unknown key".
REMOVED_KEYS: dict[str, tuple[Any, str]] = {
    "pipeline.fork_server": (
        True,
        "MergeSource processes are always forked from the fork server (a new Python per worker"
        " cost ~0.15 s of CPU and up to a second of wall time per DN at every pipeline start)",
    ),
    "dumper.warm_sources": (
        True,
        "an HA follower keeps the MergeSource fork server running instead of idle workers"
        " (they saved a takeover only the forks: < 40 ms for 3 DNs)",
    ),
    "dumper.server_uuid": (
        "6c6b0e1e-0000-4000-8000-00000000cdc1",
        "the global binlog's server_uuid (the sid of its GTIDs) is the cluster's, made once in "
        "the GMS (cdc_meta.binlog_server_identity) so that every HA dumper shares it",
    ),
    "cn.dn_client": (
        "protocol",
        "the CN's DN connections always run on its own protocol client (aiomysql was dropped)",
    ),
}


# Keys an earlier version spelt otherwise: "section.old_key" -> the key's name now. A cdc.toml
# with the old name means the same (`cluster up` rewrites it with the new one); both at once is
# an error.
RENAMED_KEYS: dict[str, str] = {
    "cn.catalog_database": "catalogue_database",
}


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """Build dataclass `cls` from plain TOML data, checking keys and types recursively."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'top level'}: expected a table, got {type(data).__name__}")
    data = _without_removed_keys(data, where)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ConfigError(f"unknown key(s) {sorted(unknown)} in [{where or 'top level'}]")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{where}.{name}" if where else name)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"[{where or 'top level'}]: {exc}") from None


def _without_removed_keys(data: dict, where: str) -> dict:
    kept = {}
    for name, value in data.items():
        key = f"{where}.{name}" if where else name
        if key in RENAMED_KEYS:
            new = RENAMED_KEYS[key]
            if new in data:
                raise ConfigError(f"{key} and its new name {new} are both set: keep {new}")
            kept[new] = value
            continue
        if key not in REMOVED_KEYS:
            kept[name] = value
            continue
        harmless, why = REMOVED_KEYS[key]
        if value != harmless:
            raise ConfigError(f"{key} = {value!r} is no longer supported: {why}; remove the key")
    return kept


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, where)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table")
        _key, item = typing.get_args(hint)
        return {str(k): _convert(item, v, f"{where}.{k}") for k, v in value.items()}
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list")
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (typing.Union, types.UnionType):
        return value
    if hint is float and isinstance(value, int):
        return float(value)
    if (
        isinstance(hint, type)
        and not isinstance(value, hint)
        or (hint is int and isinstance(value, bool))
    ):
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value
