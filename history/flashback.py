"""Flashback: the inverse of the changes a range of the global binlog made to some tables,
newest first, one inverse transaction per original one.

The range is two points (`history.points`): the transactions after `start` up to `end`. Each
rows event of a chosen table is decoded by the codec (`cdc.binlog`: the TABLE_MAP's columns and
primary key, `row_image.decode_image` for the values, whose byte spans are kept so that the
binlog output reuses the images as they are, never re-encoded). A change is inverted as
INSERT ↔ DELETE and UPDATE with its images swapped.

A **conflict** is a key that a transaction after `end` changed again: undoing the range's changes
of that key would overwrite the later one, so they are skipped (all of that key's changes, so no
half-undone row is left) and reported with the later position; `force` undoes them anyway. A DDL
on a chosen table inside the range or after it is refused (the images would not fit the table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from cdc.binlog.constants import (
    QUERY_EVENT,
    ROWS_TYPES,
    TABLE_MAP_EVENT,
    UPDATE_TYPES,
    EventType,
)
from cdc.binlog.events import cts_mark_text, decode_event, parse_cts
from cdc.binlog.fde import FormatDescription
from cdc.binlog.reader import EventReader
from cdc.binlog.row_image import decode_image
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.sql_text import parse_ddl

from .points import Point, RetainedFiles

Key = tuple
_FILE_EVENTS = frozenset(
    {
        EventType.FORMAT_DESCRIPTION,
        EventType.PREVIOUS_GTIDS,
        EventType.GTID_LIST,
        EventType.ROTATE,
        EventType.STOP,
    }
)
Want = Callable[[str, str], bool]


class FlashbackError(RuntimeError):
    """A range that cannot be undone as asked (a DDL in the way, a table without names)."""


@dataclass(slots=True)
class TableShape:
    """One TABLE_MAP of a chosen table: its raw event (reused by the binlog output)."""

    db: str
    name: str
    table_id: int
    raw: bytes
    columns: list
    key: list[int]  # the primary key's column positions (all columns when it has none)

    @property
    def names(self) -> list[str]:
        if any(c.name is None for c in self.columns):
            raise FlashbackError(
                f"{self.db}.{self.name}: the global binlog's TABLE_MAP has no column names "
                "(the DNs need binlog_row_metadata=FULL)"
            )
        return [c.name.decode() for c in self.columns]

    def key_of(self, row: list) -> Key:
        return tuple(row[i] for i in self.key)


@dataclass(slots=True)
class RowChange:
    """One row of a rows event: `kind` is write, update or delete; a write has only `after`, a
    delete only `before`; the images' bytes as the event holds them."""

    kind: str
    before: list | None
    after: list | None
    before_bytes: bytes = b""
    after_bytes: bytes = b""

    def keys(self, shape: TableShape) -> list[Key]:
        return [shape.key_of(img) for img in (self.before, self.after) if img is not None]


@dataclass(slots=True)
class RowsChange:
    """One rows event of a chosen table: its header fields for a rebuilt event, its rows."""

    shape: TableShape
    type_code: int
    timestamp: int
    server_id: int
    flags: int
    extra_data: bytes | None
    rows: list[RowChange]
    where: str  # file:pos


@dataclass(slots=True)
class Txn:
    """One transaction of the range with the changes it made to the chosen tables."""

    file: str
    pos: int
    gtid: str | None
    tso: int
    changes: list[RowsChange] = field(default_factory=list)

    def __str__(self) -> str:
        return f"'{self.file}':{self.pos} (gtid {self.gtid or '-'}, tso {self.tso})"


@dataclass(frozen=True, slots=True)
class Conflict:
    db: str
    table: str
    key: Key
    later: str  # where a transaction after the range changed the key again ('file':pos)
    later_gtid: str | None
    later_tso: int

    def __str__(self) -> str:
        return (
            f"{self.db}.{self.table} key {self.key!r}: changed again after the range by the "
            f"transaction at {self.later} (gtid {self.later_gtid or '-'}, tso {self.later_tso})"
        )


@dataclass(slots=True)
class Plan:
    """The inverse transactions, newest first (each with its changes in inverse order) and the
    conflicts skipped (or, forced, undone anyway)."""

    start: Point
    end: Point
    undo: list[Txn]
    conflicts: list[Conflict]
    forced: bool = False
    fde_raw: bytes = b""  # the first file's FORMAT_DESCRIPTION, for the binlog output

    @property
    def rows(self) -> int:
        return sum(len(c.rows) for t in self.undo for c in t.changes)


def chosen(target: str) -> Want:
    """`db` or `db.table` → whether a table is chosen (names compared lower-case)."""
    db, _, table = target.lower().partition(".")
    return lambda d, t: d.lower() == db and (not table or t.lower() == table)


class _Scanner:
    """Transactions of the files from one boundary on, with the chosen tables' row changes."""

    def __init__(self, files: RetainedFiles, want: Want) -> None:
        self.files = files
        self.want = want
        self.fde_raw = b""

    def txns(self, start: Point, end: Point | None) -> Iterator[Txn]:
        names = self.files.names
        first = names.index(start.file)
        last = names.index(end.file) if end is not None else len(names) - 1
        for name in names[first : last + 1]:
            begin = start.pos if name == start.file else 4
            stop = end.pos if end is not None and name == end.file else None
            yield from self._file(name, begin, stop)

    def _file(self, name: str, begin: int, stop: int | None) -> Iterator[Txn]:
        data = self.files.read_bytes(name)  # live or archived
        head = EventReader(data, file=name, allow_partial_tail=True)
        fde_event = next(iter(head))
        self.fde_raw = self.fde_raw or bytes(fde_event.data)
        fde = head.fde
        assert fde is not None
        reader = EventReader(
            data, file=name, start=max(begin, fde_event.end), fde=fde, allow_partial_tail=True
        )
        maps: dict[int, TableShape] = {}
        txn = None
        for ev in reader:
            if stop is not None and ev.pos >= stop:
                return
            code = ev.type_code
            if code in _FILE_EVENTS:
                continue  # a file's own, outside every transaction
            if txn is None:
                txn = Txn(name, ev.pos, None, 0)
            if code == TABLE_MAP_EVENT:
                self._map(ev, fde, maps)
            elif code in ROWS_TYPES:
                body = decode_event(ev.data, fde).body
                shape = maps.get(body.table_id)
                if shape is not None:
                    txn.changes.append(_rows(shape, body, ev, f"'{name}':{ev.pos}"))
            elif code == QUERY_EVENT:
                self._ddl(decode_event(ev.data, fde).body, f"'{name}':{ev.pos}")
            if (mark := cts_mark_text(ev.data)) is not None:
                txn.tso = parse_cts(mark) or 0
                yield txn
                txn, maps = None, {}
        # A transaction cut by `stop` or the file's end is not whole: nothing of it is yielded.

    def _map(self, ev, fde: FormatDescription, maps: dict[int, TableShape]) -> None:
        body = decode_event(ev.data, fde).body
        db, name = body.schema.decode(), body.table.decode()
        if not self.want(db, name):
            maps.pop(body.table_id, None)
            return
        columns = body.columns(mariadb=fde.is_mariadb)
        opt = body.optional
        key = list(opt.simple_primary_key or ())
        if not key and opt.primary_key_with_prefix:
            key = [i for i, _ in opt.primary_key_with_prefix]
        maps[body.table_id] = TableShape(
            db, name, body.table_id, bytes(ev.data), columns, key or list(range(len(columns)))
        )

    def _ddl(self, body, where: str) -> None:
        text = body.query.decode("utf-8", "replace")
        if not text.lstrip()[:8].upper().startswith(("CREATE", "DROP", "ALTER", "TRUNCATE")):
            return
        try:
            target = parse_ddl(text, body.db.decode() or None)
        except (CatalogueError, IndexError):
            return
        if self.want(target.db, target.table):
            raise FlashbackError(
                f"{target.db}.{target.table} was changed by DDL at {where} ({text[:80]}): "
                "flashback does not undo across DDL; choose a range and tables without it"
            )


def _rows(shape: TableShape, body, ev, where: str) -> RowsChange:
    if len(shape.columns) != body.column_count:
        raise FlashbackError(
            f"{where}: a rows event of {body.column_count} columns for a "
            f"TABLE_MAP of {len(shape.columns)}"
        )
    present, after_present = body.columns_present, body.columns_present_after
    if not all(present) or (after_present is not None and not all(after_present)):
        raise FlashbackError(
            f"{shape.db}.{shape.name}: partial row image at {where}: flashback needs "
            "binlog_row_image=FULL on the DNs"
        )
    data = body.rows_data
    view = memoryview(data)
    rows, pos = [], 0
    kind = body.kind
    while pos < len(data):
        start = pos
        image, pos = decode_image(shape.columns, present, view, pos)
        if after_present is not None:
            mid = pos
            after, pos = decode_image(shape.columns, after_present, view, pos)
            rows.append(RowChange(kind, image, after, data[start:mid], data[mid:pos]))
        elif kind == "write":
            rows.append(RowChange(kind, None, image, b"", data[start:pos]))
        else:
            rows.append(RowChange(kind, image, None, data[start:pos], b""))
    header = ev.data
    return RowsChange(
        shape,
        body.type_code,
        int.from_bytes(header[0:4], "little"),
        int.from_bytes(header[5:9], "little"),
        body.flags,
        body.extra_data,
        rows,
        where,
    )


def plan(
    files: RetainedFiles, start: Point, end: Point, want: Want, *, force: bool = False
) -> Plan:
    """The inverse of the range (start, end] for the chosen tables, conflicts taken out."""
    if (files.names.index(end.file), end.pos) < (files.names.index(start.file), start.pos):
        raise FlashbackError(f"the range's end {end} is before its start {start}")
    scanner = _Scanner(files, want)
    txns = [t for t in scanner.txns(start, end) if t.changes]
    touched = {
        (c.shape.db, c.shape.name, k)
        for t in txns
        for c in t.changes
        for r in c.rows
        for k in r.keys(c.shape)
    }
    gtid = _GtidLookup(files)
    later: dict[tuple, Conflict] = {}
    for t in scanner.txns(end, None):
        for c in t.changes:
            for r in c.rows:
                for k in r.keys(c.shape):
                    ident = (c.shape.db, c.shape.name, k)
                    if ident in touched and ident not in later:
                        later[ident] = Conflict(
                            c.shape.db, c.shape.name, k, c.where, gtid(t), t.tso
                        )
    undo = []
    for t in reversed(txns):
        inverse = Txn(t.file, t.pos, t.gtid, t.tso)
        for c in reversed(t.changes):
            rows = [
                _inverse(r)
                for r in reversed(c.rows)
                if force or not any((c.shape.db, c.shape.name, k) in later for k in r.keys(c.shape))
            ]
            if rows:
                inverse.changes.append(
                    RowsChange(
                        c.shape,
                        _inverse_type(c.type_code),
                        c.timestamp,
                        c.server_id,
                        c.flags,
                        c.extra_data,
                        rows,
                        c.where,
                    )
                )
        if inverse.changes:
            undo.append(inverse)
    for t in undo:
        t.gtid = gtid(t)
    return Plan(start, end, undo, sorted(later.values(), key=str), force, scanner.fde_raw)


class _GtidLookup:
    """A transaction's GTID from `binlog_writer.locate`'s walk of its file (locate owns how a
    transaction's GTIDs are read; the rows scan does not read them again)."""

    def __init__(self, files: RetainedFiles) -> None:
        self.files = files
        self.by_file: dict[str, dict[int, str | None]] = {}

    def __call__(self, txn: Txn) -> str | None:
        if txn.file not in self.by_file:
            self.by_file[txn.file] = {
                x.position: (x.gtids[-1] if x.gtids else None)
                for x in self.files.transactions(txn.file)
            }
        return self.by_file[txn.file].get(txn.pos)


def _inverse_type(code: int) -> int:
    if code in UPDATE_TYPES:
        return code
    base = 23 if code < 30 else 30  # WRITE at base, DELETE at base + 2
    return base + 2 if code == base else base


def _inverse(r: RowChange) -> RowChange:
    if r.kind == "write":
        return RowChange("delete", r.after, None, r.after_bytes, b"")
    if r.kind == "delete":
        return RowChange("write", None, r.before, b"", r.before_bytes)
    return RowChange("update", r.after, r.before, r.after_bytes, r.before_bytes)
