"""Pure: the events of the global binlog after a point → for each chosen table, the state there
of every primary key changed since: the before-image of its first change (None when that change
created the key). A map only grows and an entry never changes once set. Only the chosen
tables' maps and rows, and DDL, are decoded, and of a row only its key; a before-image is kept
as its bytes (`Image`), decoded when someone wants it.

Used by the snapshot read (`changes.ChangedKeys`: from the served files, one table) and by the
backfill (`backfill/global_binlog.py`: from a dump of the global binlog, its tables). DDL on a
chosen table, a row image that is not FULL, or a column count that differs from the one
expected fail the read: its rows and the binlog would disagree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cdc.binlog.constants import (
    HEADER_LEN,
    QUERY_EVENT,
    QUERY_POST_HEADER_LEN,
    TABLE_ID_LEN,
    TABLE_ID_OFFSET,
    TABLE_MAP_DB_LEN_OFFSET,
    TABLE_MAP_EVENT,
)
from cdc.binlog.events import decode_event
from cdc.binlog.fastpath import table_id_of
from cdc.binlog.fde import FormatDescription
from cdc.binlog.query import text_start
from cdc.binlog.row_image import INTEGERS, decode_image, decode_value, value_widths
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.sql_text import parse_ddl
from cdc.protocol.sql_error import SqlError
from read_path.image_walk import value_starts

ROWS = frozenset({23, 24, 25, 30, 31, 32})
ER_UNKNOWN = 1105
_DDL_WORDS = ("CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME")
_DDL_BYTES = tuple(w.encode() for w in _DDL_WORDS)

Key = tuple


class TableChangedByDdl(SqlError):
    """DDL on a chosen table after the read's position: its rows on the shards and the
    binlog's images no longer have one shape (`where`: the DDL's place, `text`: its SQL,
    `why`: what it did that the read cannot cross, when known)."""

    def __init__(self, db: str, table: str, where: str, text: str, why: str = "") -> None:
        super().__init__(
            f"{db}.{table} was changed by DDL at {where} during the read ({text[:80]}); run it "
            "again",
            ER_UNKNOWN,
            "HY000",
        )
        self.db, self.table, self.where, self.text, self.why = db, table, where, text, why


class TableShapeDiffers(SqlError):
    """A chosen table's rows at `where` have another column count than its shards: a DDL
    after the read's position, met at its first rows before the DDL itself."""

    def __init__(self, db: str, table: str, where: str, binlog: int, shards: int) -> None:
        super().__init__(
            f"{db}.{table} has {binlog} columns in the global binlog at {where} and {shards} "
            "on its shards: the table changed during the read; run it again",
            ER_UNKNOWN,
            "HY000",
        )
        self.db, self.table, self.where = db, table, where


@dataclass(frozen=True, slots=True)
class Shape:
    """The rows of a chosen table after one DDL (`ddl`, its SQL as the binlog holds it): how
    many columns they have, and where the read's columns are among them (None: all, in
    order). A read as of a point before an ADD COLUMN reads on across it (past_shape.py)."""

    ddl: str
    columns: int
    picks: list[int] | None


class Image:
    """A key's before-image as the global binlog holds it (every column present), spelled
    only if a chunk emits it (`image_text.ImageSpeller`, one per distinct `columns`); `picks`:
    where the read's columns are in it (None: all, in order)."""

    __slots__ = ("columns", "data", "picks")

    def __init__(self, columns: list, data: bytes, picks: list[int] | None = None) -> None:
        self.columns = columns
        self.data = data
        self.picks = picks

    def values(self) -> list[object]:
        """Every column's value, as the codec decodes it."""
        present = [True] * len(self.columns)
        return decode_image(self.columns, present, memoryview(self.data), 0)[0]


@dataclass(slots=True)
class TableChanges:
    """One chosen table: its key and column count, and what the events changed."""

    db: str
    name: str
    key: list[int]  # the primary key's column positions
    key_of: Callable[[list], Key]  # its decoded values (in key order) → the key as kept
    columns: int  # how many the rows must have
    changes: dict[Key, Image | None] = field(default_factory=dict)
    added: list[Key] = field(default_factory=list)  # the keys of `changes`, in order
    # Where the read's columns are in the rows (None: all, in order: the shape is the
    # shards'), and the shapes after each DDL the read crosses, in order (a DDL beyond them
    # fails the read).
    picks: list[int] | None = None
    later: list[Shape] = field(default_factory=list)

    def crossed(self, where: str, text: str) -> None:
        """A DDL on the table: its rows take the next shape, if the read knows it."""
        if not self.later or self.later[0].ddl.strip() != text.strip():
            raise TableChangedByDdl(self.db, self.name, where, text)
        shape = self.later.pop(0)
        self.columns, self.picks = shape.columns, shape.picks

    def key_here(self) -> list[int]:
        """The key's column positions in the rows of the current shape."""
        picks = self.picks
        return self.key if picks is None else [picks[i] for i in self.key]

    def first(self, key: Key, image: Image | None) -> None:
        """`key`'s state at the start, unless an earlier change gave it already."""
        if key not in self.changes:
            self.changes[key] = image
            self.added.append(key)


class FirstImages:
    def __init__(self, tables: list[TableChanges]) -> None:
        self.tables = {(t.db, t.name): t for t in tables}
        # A TABLE_MAP's raw schema and table name as a chosen table's spell them
        # (length-prefixed, each ended by a zero), read in place.
        self._by_names = {_names(t.db, t.name): t for t in tables}
        # table id → (its table, columns, their values' fixed sizes and length prefixes in a
        # row image, its key's reader), for the chosen tables' TABLE_MAPs
        self._maps: dict[int, tuple[TableChanges, list, tuple[list, list], KeyReader]] = {}
        # The same, by a TABLE_MAP's bytes after its table id: each transaction that changes
        # a table maps it again, the same, and decoding a map costs more than its rows.
        self._shapes: dict[bytes, tuple[list, tuple[list, list], KeyReader]] = {}

    def event(self, data: bytes, fde: FormatDescription, where: str) -> None:
        """One event (`where`: its place, for errors). The table id of a TABLE_MAP or rows
        event, and a QUERY's text, are read in place: only the chosen tables' maps and rows,
        and DDL, are decoded (most events are neither)."""
        code = data[4]
        if code == TABLE_MAP_EVENT:
            table_id = table_id_of(data)
            at = TABLE_MAP_DB_LEN_OFFSET
            name_at = at + data[at] + 2
            table = None
            if name_at < len(data):
                table = self._by_names.get(data[at : name_at + data[name_at] + 2])
            if table is None:
                self._maps.pop(table_id, None)  # an id a later map gives another table
                return
            body = data[TABLE_ID_OFFSET + TABLE_ID_LEN : len(data) - fde.checksum_len]
            shape = self._shapes.get(body)
            if shape is None:
                columns = decode_event(data, fde).body.columns()
                shape = (columns, layout(columns), key_reader(columns, table.key_here()))
                self._shapes[body] = shape
            self._maps[table_id] = (table, *shape)
        elif code in ROWS:
            mapped = self._maps.get(table_id_of(data))
            if mapped is not None:
                table, columns, widths, read_key = mapped
                rows(table, decode_event(data, fde).body, columns, widths, where, read_key)
        elif code == QUERY_EVENT:
            if len(data) >= HEADER_LEN + QUERY_POST_HEADER_LEN:
                head = data[text_start(data) : len(data) - fde.checksum_len].lstrip()[:8]
                if not head.upper().startswith(_DDL_BYTES):
                    return  # BEGIN, XA ..., marks: the frequent ones, not decoded
            self._ddl(decode_event(data, fde).body, where)

    def _ddl(self, body, where: str) -> None:
        target = ddl_target(body)
        if target is not None and target[:2] in self.tables:
            self.tables[target[:2]].crossed(where, target[2])
            # The key's readers were made for the shape before it (`key_here`).
            self._shapes.clear()
            self._maps.clear()


def ddl_target(body) -> tuple[str, str, str] | None:
    """A QUERY event body's DDL on a table: (db, table, its SQL); None for anything else."""
    text = body.query.decode("utf-8", "replace")
    if not text.lstrip()[:8].upper().startswith(_DDL_WORDS):
        return None  # BEGIN, XA ..., marks: the frequent ones, not tokenized
    try:
        target = parse_ddl(text, body.db.decode() or None)
    except (CatalogueError, IndexError):
        return None  # CREATE DATABASE and such
    return target.db, target.table, text


def rows(
    table: TableChanges,
    body,
    columns: list,
    layout: tuple[list, list],
    where: str,
    read_key: KeyReader | None = None,
) -> None:
    """The keys a rows event changes; a key's first change keeps its before-image's bytes
    (decoded only if a chunk emits it: most changed keys are never looked at again, or were
    emitted already). Only the key's columns are decoded (`read_key`: made once per map)."""
    if len(columns) != table.columns:
        raise TableShapeDiffers(table.db, table.name, where, len(columns), table.columns)
    present, present_after = body.columns_present, body.columns_present_after
    if not all(present) or (present_after is not None and not all(present_after)):
        raise SqlError(
            f"{table.db}.{table.name}: partial row image in the global binlog at {where}: "
            "snapshot reads need binlog_row_image=FULL on the DNs",
            ER_UNKNOWN,
            "HY000",
        )
    data = body.rows_data
    view = memoryview(data)
    fixed, prefix = layout
    changes, key_of, first = table.changes, table.key_of, table.first
    picks = table.picks
    read_key = read_key or key_reader(columns, table.key_here())
    writes = body.kind == "write"
    starts = [0] * len(columns)
    pos, end = 0, len(data)
    single = getattr(read_key, "single", None)
    if single is not None and key_of is tuple:
        # One integer key column kept as it is (the usual table): unpacked in place, no call.
        at, unpack = single
        while pos < end:
            start = pos
            pos = value_starts(data, pos, fixed, prefix, starts)
            before = (None if (s := starts[at]) < 0 else unpack(data, s)[0],)
            if writes:
                first(before, None)
                continue
            if before not in changes:  # its state at the start
                first(before, Image(columns, data[start:pos], picks))
            if present_after is not None:  # an update: its after-image follows
                pos = value_starts(data, pos, fixed, prefix, starts)
                after = (None if (s := starts[at]) < 0 else unpack(data, s)[0],)
                if after != before:  # the key itself changed: absent at the start
                    first(after, None)
        return
    while pos < end:
        start = pos
        pos = value_starts(data, pos, fixed, prefix, starts)
        before = key_of(read_key(data, view, starts))
        if writes:
            first(before, None)
            continue
        if before not in changes:  # its state at the start
            first(before, Image(columns, data[start:pos], picks))
        if present_after is not None:  # an update: its after-image follows
            pos = value_starts(data, pos, fixed, prefix, starts)
            after = key_of(read_key(data, view, starts))
            if after != before:  # the key itself changed: absent at the start
                first(after, None)


def layout(columns: list) -> tuple[list[int], list[int]]:
    """Each column's fixed size and length-prefix width in a row image (`image_walk`)."""
    widths = value_widths(columns)
    return [fixed for fixed, _ in widths], [prefix for _, prefix in widths]


# (the rows data, a view of it, where each column's value starts) → the key's values
KeyReader = Callable[[bytes, memoryview, list], list]


def key_reader(columns: list, key: list[int]) -> KeyReader:
    """The key's values of a row image whose columns start at `starts` (`value_starts`): an
    integer column (the usual key) unpacked where it starts, any other decoded by the codec.
    `value_starts` checked that every value lies within the data."""
    unpacks = []
    for i in key:
        widths = INTEGERS.get(columns[i].type)
        if widths is None:
            return lambda data, view, starts: _values(columns, key, view, starts)
        unpacks.append((i, (widths[2] if columns[i].unsigned else widths[1]).unpack_from))
    if len(unpacks) == 1:
        ((at, unpack),) = unpacks

        # A NULL key column (-1) cannot be in a primary key; the codec's None kept anyway.
        def one(data: bytes, view: memoryview, starts: list) -> list:
            return [None if (s := starts[at]) < 0 else unpack(data, s)[0]]

        one.single = (at, unpack)  # type: ignore[attr-defined]  (`rows` reads it in place)
        return one
    return lambda data, view, starts: [
        None if (s := starts[at]) < 0 else unpack(data, s)[0] for at, unpack in unpacks
    ]


def _values(columns: list, key: list[int], view: memoryview, starts: list) -> list:
    """The key's values of the row image whose columns start at `starts`."""
    return [None if starts[i] < 0 else decode_value(columns[i], view, starts[i], i)[0] for i in key]


def _names(db: str, name: str) -> bytes:
    a, b = db.encode(), name.encode()
    return bytes([len(a)]) + a + b"\0" + bytes([len(b)]) + b + b"\0"
