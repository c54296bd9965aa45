"""Multi-stream global binlog (`[dumper] streams = N`): which stream a table belongs to, and
where each stream lives (its port, binlog directory, server_uuid). Shared by the dumper (that
splits the merged order), its server (`SHOW BINARY STREAMS`) and the checks; docs/streams.md.

The hash is CRC32 of the UTF-8 name, never Python's `hash()` (salted per process): a table must
land on the same stream in every process and after every restart, or a stream's files would
hold half of a table's history."""

from __future__ import annotations

import dataclasses
import os
import uuid
import zlib
from pathlib import Path

from cdc.config import Config, ConfigError, DumperConfig, host_port

STREAM_BY = ("table", "database")


def stream_hash(name: str) -> int:
    """A hash that is the same in every process and Python version."""
    return zlib.crc32(name.encode())


class StreamRouter:
    """Table → stream. `by` "table": `db.table` is hashed; "database": `db` is hashed, so that
    the tables of one database (often written together) stay in one stream. `pinned`:
    `"db.table"` (or `"db"`) → stream, chosen by the user (tables that share transactions
    kept together); a pin wins over the hash. Names compare case-sensitively, as the binlog
    carries them."""

    __slots__ = ("streams", "by", "pinned", "_cache")

    def __init__(self, streams: int, by: str = "table", pinned: dict[str, int] | None = None):
        if streams < 1:
            raise ValueError(f"streams = {streams}: must be ≥ 1")
        if by not in STREAM_BY:
            raise ValueError(f"stream_by = {by!r}: must be one of {STREAM_BY}")
        self.streams = streams
        self.by = by
        self.pinned = dict(pinned or {})
        for name, s in self.pinned.items():
            if not 0 <= s < streams:
                raise ValueError(f"stream_tables {name!r} = {s}: must be in 0..{streams - 1}")
        self._cache: dict[tuple[bytes, bytes], int] = {}

    @classmethod
    def of(cls, config: Config) -> StreamRouter:
        d = config.dumper
        return cls(d.streams, d.stream_by, d.stream_tables)

    def stream_of(self, db: bytes, table: bytes) -> int:
        """The stream of logical table `db`.`table` (bytes, as a TABLE_MAP names it)."""
        key = (db, table)
        s = self._cache.get(key)
        if s is None:
            s = self._cache[key] = self._route(db.decode(), table.decode())
        return s

    def _route(self, db: str, table: str) -> int:
        if self.streams == 1:
            return 0
        full = f"{db}.{table}"
        if full in self.pinned:
            return self.pinned[full]
        if db in self.pinned:
            return self.pinned[db]
        return stream_hash(db if self.by == "database" else full) % self.streams

    def streams_of_ddl(self, db: str, table: str) -> list[int]:
        """The streams a DDL goes to: its table's; a database-level DDL (no table) under
        `by = "table"` concerns tables of every stream, so it goes to all."""
        if not table and self.by == "table":
            return list(range(self.streams))
        if not table:
            return [self.pinned.get(db, stream_hash(db) % self.streams)]
        return [self.stream_of(db.encode(), table.encode())]


def stream_port(d: DumperConfig, stream: int) -> int:
    """Stream `stream`'s MySQL port: `[dumper] stream_port` + index (0: the main port + 1 +
    index, the main port keeps answering `SHOW BINARY STREAMS`)."""
    return (d.stream_port or d.port + 1) + stream


def stream_address(d: DumperConfig, stream: int) -> tuple[str, int] | None:
    """Where stream `stream`'s process listens when it runs on another host
    (`[dumper.stream_addresses]`); None: the merge starts it itself."""
    address = d.stream_addresses.get(str(stream))
    return None if address is None else host_port(address)


def stream_dir(d: DumperConfig, stream: int) -> Path:
    """Stream `stream`'s binlog directory: its own files and index."""
    return Path(d.binlog_dir) / f"stream{stream}"


def archive_of(d: DumperConfig, binlog_dir: str | os.PathLike[str] | None) -> Path:
    """Where the purged files of `binlog_dir` go: `[dumper] archive_dir`; an HA peer's in
    `dumper-<id>` of it and a stream's in a directory named as the stream's, since their
    files share names (peers may share a host, and so the path). The server archives there
    and every reader outside it (`cdc flashback`, `cdc locate`) looks there."""
    path = Path(d.archive_dir)
    if d.peers and d.id:
        path /= f"dumper-{d.id}"
    if d.streams > 1 and binlog_dir:
        path /= Path(binlog_dir).name
    return path


# In a stream's directory: the merge's key its stream process last synced (an idle stream holds
# no transaction of the last batches; dumper/streams/stream_process.py writes it, an HA
# follower's copy drops it).
STREAM_PROGRESS_FILE = "stream.progress"


def stream_gtid_domain(d: DumperConfig, stream: int) -> int:
    """The mariadb flavour's GTID domain of a stream: a replica that follows several streams
    (multi-source) keeps one position per domain, so each stream has its own."""
    return d.gtid_domain_id + stream


def stream_server_uuid(cluster_uuid: str, stream: int) -> str:
    """Each stream's own server_uuid (the sid of its gapless GTIDs), derived from the
    cluster's: stable across restarts and hosts without another GMS row."""
    return str(uuid.uuid5(uuid.UUID(cluster_uuid), f"cdc-stream-{stream}"))


def stream_config(config: Config, stream: int) -> Config:
    """The configuration stream `stream`'s process runs with: a single-stream dumper on its own
    port, binlog directory and metrics port (`metrics_port` + 1 + index when set)."""
    if not 0 <= stream < config.dumper.streams:
        raise ConfigError(f"stream {stream}: [dumper] streams = {config.dumper.streams}")
    d = config.dumper
    dumper = dataclasses.replace(
        d,
        port=stream_port(d, stream),
        binlog_dir=str(stream_dir(d, stream)),
        gtid_domain_id=stream_gtid_domain(d, stream),
        metrics_port=d.metrics_port + 1 + stream if d.metrics_port else 0,
        streams=1,
        stream_tables={},
        stream_addresses={},
    )
    return dataclasses.replace(config, dumper=dumper)
