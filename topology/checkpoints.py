"""Per-stream restart positions (one per DN's MergeSource): the earliest binlog position that
still holds an unresolved branch, with the TSO already safely downstream."""

from __future__ import annotations

from dataclasses import dataclass

import pymysql


@dataclass(frozen=True, slots=True)
class Checkpoint:
    stream: str
    file: str
    position: int
    tso: int


class CheckpointStore:
    def __init__(self, conn: pymysql.Connection, database: str = "cdc_meta"):
        self._conn = conn
        self._table = f"`{database}`.binlog_checkpoint"

    def save(self, cp: Checkpoint) -> None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self._table} (stream, file_name, position, tso) VALUES (%s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE file_name=VALUES(file_name), position=VALUES(position), tso=VALUES(tso)",
                (cp.stream, cp.file, cp.position, cp.tso),
            )

    def load(self, stream: str) -> Checkpoint | None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT file_name, position, tso FROM {self._table} WHERE stream=%s", (stream,)
            )
            row = cur.fetchone()
        return Checkpoint(stream, row[0], int(row[1]), int(row[2])) if row else None
