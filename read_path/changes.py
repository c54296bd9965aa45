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

from cdc.binlog.constants import (
    FORMAT_DESCRIPTION_EVENT,
    HEADER_LEN,
    QUERY_EVENT,
    QUERY_POST_HEADER_LEN,
    TABLE_ID_LEN,
    TABLE_ID_OFFSET,
    TABLE_MAP_DB_LEN_OFFSET,
    TABLE_MAP_EVENT,
)
from cdc.binlog.events import cts_mark_text, decode_event, parse_cts
from cdc.binlog.fastpath import table_id_of
from cdc.binlog.fde import FormatDescription
from cdc.binlog.query import text_start
from cdc.binlog.row_image import decode_value, value_widths
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.sql_text import parse_ddl
from cdc.protocol.sql_error import SqlError
from read_path.image_walk import value_starts
from read_path.served import ServedFiles

ROWS = frozenset({23, 24, 25, 30, 31, 32})
ER_UNKNOWN = 1105
EVENTS_PER_TURN = 256  # ~1 ms of decoding between the loop's turns
_DDL_WORDS = ("CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME")
_DDL_BYTES = tuple(w.encode() for w in _DDL_WORDS)

Key = tuple


class ChangedKeys:
    def __init__(
        self,
        files: ServedFiles,
        start: tuple[str, int],
        table: tuple[str, str],
        key: list[int],
        key_of: Callable[[list], Key],
        columns: int,
    ) -> None:
        self.files = files
        self.file, self.pos = start
        self.table = table
        self.key = key  # the primary key's column positions
        self.key_of = key_of  # its decoded values (in key order) → the key as a page has it
        self.columns = columns
        self.changes: dict[Key, Image | None] = {}
        self.added: list[Key] = []  # the keys of `changes`, in the order they came
        self.max_mark = 0  # the largest CTS mark's TSO read so far
        self._fde: FormatDescription | None = None
        # table id → (columns, their values' fixed sizes and length prefixes in a row image),
        # for the table's TABLE_MAPs
        self._maps: dict[int, tuple[list, tuple[list, list]]] = {}
        # The same, by a TABLE_MAP's bytes after its table id: each transaction that changes
        # the table maps it again, the same, and decoding a map costs more than its rows.
        self._shapes: dict[bytes, tuple[list, tuple[list, list]]] = {}
        # A TABLE_MAP's raw schema and table name as this table's spells them (length-prefixed).
        db, name = (n.encode() for n in table)
        self._names = bytes([len(db)]) + db + b"\0" + bytes([len(name)]) + name + b"\0"

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
        fde = self._fde
        assert fde is not None
        # The table id of a TABLE_MAP or rows event, and a QUERY's text, are read in place:
        # only the table's own maps and rows, and DDL, are decoded (most events are neither).
        if code == TABLE_MAP_EVENT:
            table_id = table_id_of(data)
            names = self._names
            if data[TABLE_MAP_DB_LEN_OFFSET : TABLE_MAP_DB_LEN_OFFSET + len(names)] != names:
                self._maps.pop(table_id, None)  # an id a later map gives another table
                return
            body = data[TABLE_ID_OFFSET + TABLE_ID_LEN : len(data) - fde.checksum_len]
            shape = self._shapes.get(body)
            if shape is None:
                columns = decode_event(data, fde).body.columns()
                shape = self._shapes[body] = (columns, layout(columns))
            self._maps[table_id] = shape
        elif code in ROWS:
            shape = self._maps.get(table_id_of(data))
            if shape is not None:
                self._rows(decode_event(data, fde).body, *shape, where)
        elif code == QUERY_EVENT:
            if len(data) >= HEADER_LEN + QUERY_POST_HEADER_LEN:
                head = data[text_start(data) : len(data) - fde.checksum_len].lstrip()[:8]
                if not head.upper().startswith(_DDL_BYTES):
                    return  # BEGIN, XA ..., marks: the frequent ones, not decoded
            self._ddl(decode_event(data, fde).body, where)
        elif (mark := cts_mark_text(data)) is not None:
            tso = parse_cts(mark)
            if tso is not None and tso > self.max_mark:
                self.max_mark = tso

    def _rows(self, body, columns: list, layout: tuple[list, list], where: str) -> None:
        """The keys a rows event changes; a key's first change keeps its before-image's bytes
        (decoded only if a chunk emits it: most changed keys are never looked at again, or
        were emitted already). Only the key's columns are decoded."""
        name = ".".join(self.table)
        if len(columns) != self.columns:
            raise SqlError(
                f"{name} has {len(columns)} columns in the global binlog at {where} and "
                f"{self.columns} on its shards: the table changed during the read; run it again",
                ER_UNKNOWN,
                "HY000",
            )
        present, present_after = body.columns_present, body.columns_present_after
        if not all(present) or (present_after is not None and not all(present_after)):
            raise SqlError(
                f"{name}: partial row image in the global binlog at {where}: snapshot "
                "reads need binlog_row_image=FULL on the DNs",
                ER_UNKNOWN,
                "HY000",
            )
        data = body.rows_data
        view = memoryview(data)
        fixed, prefix = layout
        changes, key, key_of = self.changes, self.key, self.key_of
        starts = [0] * len(columns)
        pos, end = 0, len(data)
        while pos < end:
            start = pos
            pos = value_starts(data, pos, fixed, prefix, starts)
            first = key_of(_values(columns, key, view, starts))
            if body.kind == "write":
                self._first(first, None)
                continue
            if first not in changes:  # its state at P
                self._first(first, Image(columns, data[start:pos]))
            if present_after is not None:  # an update: its after-image follows
                pos = value_starts(data, pos, fixed, prefix, starts)
                self._first(key_of(_values(columns, key, view, starts)), None)  # absent at P

    def _first(self, key: Key, image: Image | None) -> None:
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


class Image:
    """A key's before-image as the global binlog holds it (every column present), spelled
    only if a chunk emits it (`image_text.ImageSpeller`, one per distinct `columns`)."""

    __slots__ = ("columns", "data")

    def __init__(self, columns: list, data: bytes) -> None:
        self.columns = columns
        self.data = data


def layout(columns: list) -> tuple[list[int], list[int]]:
    """Each column's fixed size and length-prefix width in a row image (`image_walk`)."""
    widths = value_widths(columns)
    return [fixed for fixed, _ in widths], [prefix for _, prefix in widths]


def _values(columns: list, key: list[int], view: memoryview, starts: list) -> list:
    """The key's values of the row image whose columns start at `starts`."""
    return [None if starts[i] < 0 else decode_value(columns[i], view, starts[i], i)[0] for i in key]


def _fde(files: ServedFiles, name: str) -> FormatDescription:
    return FormatDescription.parse(files.read_fde(name).data[19:])
