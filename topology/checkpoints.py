"""Per-stream restart positions (one per DN's MergeSource): the earliest binlog position that
still holds an unresolved branch, with the largest TSO seen before it. The GMS column `tso`
holds `Checkpoint.max_tso_seen` (the name predates the shared type; no migration for a name)."""

from __future__ import annotations

import pymysql

from cdc.keys import Checkpoint, GlobalKey

__all__ = ["Checkpoint", "CheckpointHistory", "CheckpointStore"]


class CheckpointStore:
    def __init__(self, conn: pymysql.Connection, database: str = "cdc_meta"):
        self._conn = conn
        self._table = f"`{database}`.binlog_checkpoint"

    def save(self, cp: Checkpoint) -> None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self._table} (stream, file_name, position, tso) VALUES (%s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE file_name=VALUES(file_name), position=VALUES(position), tso=VALUES(tso)",
                (cp.stream, cp.file, cp.position, cp.max_tso_seen),
            )

    def load(self, stream: str) -> Checkpoint | None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT file_name, position, tso FROM {self._table} WHERE stream=%s", (stream,)
            )
            row = cur.fetchone()
        return Checkpoint(stream, row[0], int(row[1]), int(row[2])) if row else None


class CheckpointHistory:
    """Checkpoints keyed by the global key of the watermark they were taken at.

    A checkpoint taken at watermark `w` says "everything of this DN with a key above `w` lies at
    or after this position". That is a fact about the DN's binlog, true whoever took it, so a
    leader whose copy of the global binlog ends at key `K` may resume from any checkpoint with
    `w <= K` and drops what it re-reads up to `K`. An HA follower that took over behind the old
    leader therefore re-reads from an older position instead of skipping transactions.
    """

    def __init__(self, conn: pymysql.Connection, database: str = "cdc_meta"):
        self._conn = conn
        self._table = f"`{database}`.binlog_checkpoint_history"

    def save(self, watermark: GlobalKey, cp: Checkpoint) -> None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT IGNORE INTO {self._table} (stream, wm_tso, wm_kind, wm_dn, wm_seq, "
                "file_name, position, tso) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (cp.stream, *watermark, cp.file, cp.position, cp.max_tso_seen),
            )

    def at_or_below(self, stream: str, key: GlobalKey) -> Checkpoint | None:
        """The newest checkpoint of `stream` taken at a watermark at or below `key`."""
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT file_name, position, tso FROM {self._table} WHERE stream=%s "
                "AND (wm_tso, wm_kind, wm_dn, wm_seq) <= (%s, %s, %s, %s) "
                "ORDER BY wm_tso DESC, wm_kind DESC, wm_dn DESC, wm_seq DESC LIMIT 1",
                (stream, *key),
            )
            row = cur.fetchone()
        return Checkpoint(stream, row[0], int(row[1]), int(row[2])) if row else None

    def has(self, stream: str) -> bool:
        with self._conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {self._table} WHERE stream=%s LIMIT 1", (stream,))
            return cur.fetchone() is not None

    def prune(self, stream: str, keep_s: int) -> None:
        """Forget checkpoints older than `keep_s` seconds, always keeping the newest one."""
        with self._conn.cursor() as cur:
            cur.execute(f"SELECT MAX(created_at) FROM {self._table} WHERE stream=%s", (stream,))
            newest = cur.fetchone()[0]
            if newest is None:
                return
            cur.execute(
                f"DELETE FROM {self._table} WHERE stream=%s AND created_at < %s "
                "AND created_at < NOW(6) - INTERVAL %s SECOND",
                (stream, newest, keep_s),
            )
