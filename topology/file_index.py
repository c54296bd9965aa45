"""The global binlog file index in the GMS: file, first/last TSO, size; maps a TSO to a file."""

from __future__ import annotations

from dataclasses import dataclass

import pymysql


@dataclass(frozen=True, slots=True)
class FileEntry:
    file: str
    first_tso: int | None
    last_tso: int | None
    size: int


class FileIndex:
    def __init__(self, conn: pymysql.Connection, database: str = "cdc_meta"):
        self._conn = conn
        self._table = f"`{database}`.binlog_file_index"

    def upsert(self, entry: FileEntry) -> None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {self._table} (file_name, first_tso, last_tso, size) VALUES (%s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE first_tso=COALESCE(first_tso, VALUES(first_tso)), "
                "last_tso=VALUES(last_tso), size=VALUES(size)",
                (entry.file, entry.first_tso, entry.last_tso, entry.size),
            )

    def entries(self) -> list[FileEntry]:
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT file_name, first_tso, last_tso, size FROM {self._table} ORDER BY file_name"
            )
            return [FileEntry(f, _opt(a), _opt(b), int(s)) for f, a, b, s in cur.fetchall()]

    def file_for(self, tso: int) -> FileEntry | None:
        """The file whose transactions cover `tso`: the last file that starts at or before it."""
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT file_name, first_tso, last_tso, size FROM {self._table} "
                "WHERE first_tso <= %s ORDER BY first_tso DESC, file_name DESC LIMIT 1",
                (tso,),
            )
            row = cur.fetchone()
        return FileEntry(row[0], _opt(row[1]), _opt(row[2]), int(row[3])) if row else None

    def remove(self, file: str) -> None:
        with self._conn.cursor() as cur:
            cur.execute(f"DELETE FROM {self._table} WHERE file_name=%s", (file,))


def _opt(value) -> int | None:
    return None if value is None else int(value)
