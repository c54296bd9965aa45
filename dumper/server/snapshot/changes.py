"""The global binlog from a statement's position P, as the server's files hold it: for one
logical table, the state at P of every primary key changed since (the before-image of its first
change; None when that change created the key), and the largest CTS mark read, which tells when
a high watermark TSO is covered. The map only grows and an entry never changes once set, so
one scan serves every chunk of a statement, continuing where it stopped (docs/snapshot-reads.md).

Reading past a chunk's high watermark is harmless: a key first changed after H was read
unchanged, and its before-image is that same state at P."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cdc.binlog.constants import FORMAT_DESCRIPTION_EVENT, QUERY_EVENT, TABLE_MAP_EVENT
from cdc.binlog.events import cts_mark_text, decode_event, parse_cts
from cdc.binlog.fde import FormatDescription
from cdc.binlog.row_image import MISSING
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.sql_text import parse_ddl
from dumper.server.dump.binlog_files import BinlogFiles
from dumper.server.handlers import SqlError

ROWS = frozenset({23, 24, 25, 30, 31, 32})
ER_UNKNOWN = 1105
EVENTS_PER_TURN = 256  # ~1 ms of decoding between the loop's turns
_DDL_WORDS = ("CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME")

Key = tuple


class ChangedKeys:
    def __init__(
        self,
        files: BinlogFiles,
        start: tuple[str, int],
        table: tuple[str, str],
        key_of: Callable[[tuple], Key],
        columns: int,
    ) -> None:
        self.files = files
        self.file, self.pos = start
        self.table = table
        self.key_of = key_of
        self.columns = columns
        self.changes: dict[Key, tuple | None] = {}
        self.added: list[Key] = []  # the keys of `changes`, in the order they came
        self.max_mark = 0  # the largest CTS mark's TSO read so far
        self._fde: FormatDescription | None = None
        self._maps: dict[int, list] = {}  # table id → columns, for the table's TABLE_MAPs

    async def advance(self) -> None:
        """Read every whole event written since the last call, letting the loop's other
        sessions and dumps run every EVENTS_PER_TURN events (a transaction pinned long ago
        rescans from its P with each statement)."""
        budget = EVENTS_PER_TURN
        while True:
            names = self.files.names()
            if self.file not in names:
                raise SqlError(
                    f"{self.file}, where this read started, was purged during the read; run it "
                    "again",
                    ER_UNKNOWN,
                    "HY000",
                )
            later = names[names.index(self.file) + 1 :]
            if self._fde is None:
                self._fde = _fde(self.files, self.file)
            for ev in self.files.events(self.file, self.pos):
                self._event(ev.data, f"{self.file}:{ev.pos}")
                self.pos = ev.pos + len(ev.data)
                budget -= 1
                if budget <= 0:
                    await asyncio.sleep(0)
                    budget = EVENTS_PER_TURN
            if not later:
                return
            # A later file existed before this one was read: this one was finished.
            self.file, self.pos, self._fde = later[0], 4, None

    def _event(self, data: bytes, where: str) -> None:
        code = data[4]
        if code == FORMAT_DESCRIPTION_EVENT:
            self._fde = FormatDescription.parse(data[19:])
            return
        assert self._fde is not None
        if code == TABLE_MAP_EVENT:
            ev = decode_event(data, self._fde)
            if (ev.body.schema.decode(), ev.body.table.decode()) == self.table:
                self._maps[ev.body.table_id] = ev.body.columns()
        elif code in ROWS:
            ev = decode_event(data, self._fde)
            columns = self._maps.get(ev.body.table_id)
            if columns is not None:
                self._rows(ev.body, columns, where)
        elif code == QUERY_EVENT:
            self._ddl(decode_event(data, self._fde).body, where)
        elif (mark := cts_mark_text(data)) is not None:
            tso = parse_cts(mark)
            if tso is not None and tso > self.max_mark:
                self.max_mark = tso

    def _rows(self, body, columns: list, where: str) -> None:
        name = ".".join(self.table)
        if len(columns) != self.columns:
            raise SqlError(
                f"{name} has {len(columns)} columns in the global binlog at {where} and "
                f"{self.columns} on its shards: the table changed during the read; run it again",
                ER_UNKNOWN,
                "HY000",
            )
        for item in body.decode_rows(columns):
            before, after = item if body.is_update else (item, item)
            if any(v is MISSING for v in before) or any(v is MISSING for v in after):
                raise SqlError(
                    f"{name}: partial row image in the global binlog at {where}: snapshot "
                    "reads need binlog_row_image=FULL on the DNs",
                    ER_UNKNOWN,
                    "HY000",
                )
            if body.kind == "write":
                self._first(self.key_of(after), None)
            elif body.kind == "delete":
                self._first(self.key_of(before), tuple(before))
            else:
                self._first(self.key_of(before), tuple(before))
                self._first(self.key_of(after), None)  # a new key was absent at P

    def _first(self, key: Key, image: tuple | None) -> None:
        """`key`'s state at P, unless an earlier change gave it already."""
        if key not in self.changes:
            self.changes[key] = image
            self.added.append(key)

    def _ddl(self, body, where: str) -> None:
        text = body.query.decode("utf-8", "replace")
        if not text.lstrip()[:8].upper().startswith(_DDL_WORDS):
            return  # BEGIN, XA ..., marks: the frequent ones, not tokenized
        try:
            target = parse_ddl(text, body.db.decode() or None)
        except (CatalogueError, IndexError):
            return  # BEGIN, XA, CREATE DATABASE and such
        if (target.db, target.table) == self.table:
            raise SqlError(
                f"{'.'.join(self.table)} was changed by DDL at {where} during the read "
                f"({text[:80]}); run it again",
                ER_UNKNOWN,
                "HY000",
            )


def _fde(files: BinlogFiles, name: str) -> FormatDescription:
    return FormatDescription.parse(files.read_fde(name).data[19:])
