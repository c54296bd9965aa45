"""An index of the global binlog's changed keys, a segment of a file at a time, so that a read as
of an old point decodes only what it needs (docs/snapshot-reads.md, "Cost"): for each logical
table of a segment, the first change in the segment of each distinct primary key (its raw bytes
in the row image), with where that change's before-image lies in the file (none when the change
created the key). A read then takes, per segment after its point, only the keys it has not met
yet, and reads only their before-images; a segment without the table costs nothing.

Pure and derived: `build_segment` computes it from a segment's events (the server builds it off
its event loop, `dumper/server/store/change_index.py`), `replay` hands a read's `TableChanges`
the same first images the scan of those events would (tests/read_path/test_change_index.py
checks the two byte for byte). Whatever the index cannot answer exactly is left to the scan: a
segment with DDL on the table, a partial row image, table maps that differ, no primary key in
the TABLE_MAP (binlog_row_metadata=FULL gives it), or a key or column count other than the
read's. A segment ends after a transaction's CTS mark, so its events never continue a table map
of the segment before it."""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
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
from cdc.binlog.events import cts_mark_text, decode_event, parse_cts
from cdc.binlog.fastpath import table_id_of
from cdc.binlog.fde import FormatDescription
from cdc.binlog.query import text_start
from cdc.binlog.row_image import decode_value
from read_path.first_images import _DDL_BYTES, ROWS, Image, TableChanges, ddl_target, layout
from read_path.image_walk import value_starts
from read_path.served import Event

# A segment ends at the first transaction's end past this many bytes: a read as of a point
# scans from it to its segment's end, and checks each later segment's tail before using it.
SEGMENT_BYTES = 1 << 20
TAIL_CHECK = 4096  # the bytes before a segment's end whose CRC tells the file is still the one


@dataclass(slots=True)
class TableSegment:
    """One table's first changes in a segment, in the order they came."""

    map_event: bytes  # the table's TABLE_MAP
    map_body: bytes  # its bytes after the table id: every map of the table in the segment's
    columns: int
    key: tuple[int, ...]  # the primary key's column positions, as the TABLE_MAP gives them
    scan: bool = False  # the index cannot answer for the table here: the read scans it
    keys: bytearray = field(default_factory=bytearray)  # each first change's raw key, end to end
    key_ends: array = field(default_factory=lambda: array("I"))
    images_at: array = field(default_factory=lambda: array("Q"))  # its before-image in the file
    image_sizes: array = field(default_factory=lambda: array("I"))  # 0: absent at the start
    _seen: set | None = field(default_factory=set)  # while built: the raw keys met

    def add(self, raw: bytes, at: int, size: int) -> None:
        seen = self._seen
        assert seen is not None
        if raw in seen:
            return
        seen.add(raw)
        self.keys += raw
        self.key_ends.append(len(self.keys))
        self.images_at.append(at)
        self.image_sizes.append(size)

    def nbytes(self) -> int:
        return (
            len(self.map_event)
            + len(self.map_body)
            + len(self.keys)
            + sum(a.itemsize * len(a) for a in (self.key_ends, self.images_at, self.image_sizes))
        )


@dataclass(slots=True)
class SegmentIndex:
    """The index of `name`[begin:end) (`end` after a CTS mark, or the end of a finished file)."""

    name: str
    begin: int
    end: int
    tail_crc: int  # CRC-32 of the TAIL_CHECK bytes before `end`: checked before each use
    max_mark: int = 0  # the largest CTS mark's TSO in the segment
    tables: dict[bytes, TableSegment] = field(default_factory=dict)  # by the map's raw names
    ddl: set[tuple[str, str]] = field(default_factory=set)  # the tables a DDL in it names

    def nbytes(self) -> int:
        return 200 + sum(t.nbytes() + len(n) for n, t in self.tables.items())


def tail_crc(read: Callable[[int, int], bytes], end: int) -> int:
    """The CRC of the bytes before `end` a segment is checked by (`read(pos, size)`)."""
    at = max(0, end - TAIL_CHECK)
    return zlib.crc32(read(at, end - at))


def names_of(db: str, name: str) -> bytes:
    """A table's names as a TABLE_MAP spells them (length-prefixed, each ended by a zero)."""
    a, b = db.encode(), name.encode()
    return bytes([len(a)]) + a + b"\0" + bytes([len(b)]) + b + b"\0"


def build_segment(
    name: str,
    begin: int,
    events: Iterable[Event],
    fde: FormatDescription,
    finished: bool,
    read: Callable[[int, int], bytes],
    limit: int = SEGMENT_BYTES,
) -> SegmentIndex | None:
    """The index of the segment of `name` that starts at `begin` (`events`: the file's from
    there); None when the file has no whole segment there yet (it is being written)."""
    seg = SegmentIndex(name, begin, begin, 0)
    maps: dict[int, tuple[TableSegment, tuple] | None] = {}
    shapes: dict[bytes, tuple[list, tuple[list, list], tuple[int, ...]]] = {}
    end = begin
    cut = False
    for ev in events:
        data = ev.data
        end = ev.pos + len(data)
        code = data[4]
        if code == TABLE_MAP_EVENT:
            maps[table_id_of(data)] = _table_map(seg, data, fde, shapes)
        elif code in ROWS:
            mapped = maps.get(table_id_of(data))
            if mapped is not None and not mapped[0].scan:
                _rows(mapped[0], data, ev.pos, fde, mapped[1])
        elif code == QUERY_EVENT:
            if len(data) >= HEADER_LEN + QUERY_POST_HEADER_LEN:
                head = data[text_start(data) : len(data) - fde.checksum_len].lstrip()[:8]
                if head.upper().startswith(_DDL_BYTES):
                    target = ddl_target(decode_event(data, fde).body)
                    if target is not None:
                        seg.ddl.add(target[:2])
        elif (mark := cts_mark_text(data)) is not None:
            tso = parse_cts(mark)
            if tso is not None and tso > seg.max_mark:
                seg.max_mark = tso
            if end - begin >= limit:
                cut = True
                break
    if not cut and (not finished or end == begin):
        return None
    seg.end = end
    seg.tail_crc = tail_crc(read, end)
    for table in seg.tables.values():
        table._seen = None  # built: its set is not kept
    return seg


def _table_map(seg: SegmentIndex, data: bytes, fde: FormatDescription, shapes: dict):
    at = TABLE_MAP_DB_LEN_OFFSET
    name_at = at + data[at] + 2
    if name_at >= len(data):
        return None
    names = data[at : name_at + data[name_at] + 2]
    body = data[TABLE_ID_OFFSET + TABLE_ID_LEN : len(data) - fde.checksum_len]
    shape = shapes.get(body)
    if shape is None:
        tm = decode_event(data, fde).body
        columns = tm.columns()
        opt = tm.optional
        key = list(opt.simple_primary_key or ())
        if not key and opt.primary_key_with_prefix:
            key = [i for i, _ in opt.primary_key_with_prefix]  # the whole column: finer still
        shape = shapes[body] = (columns, layout(columns), tuple(key))
    table = seg.tables.get(names)
    if table is None:
        table = seg.tables[names] = TableSegment(bytes(data), body, len(shape[0]), shape[2])
        table.scan = not shape[2]  # no primary key known: the read scans
    elif table.map_body != body:
        table.scan = True  # another shape in one segment: left to the scan's checks
    return table, shape


def _rows(table: TableSegment, data: bytes, pos: int, fde: FormatDescription, shape) -> None:
    """The first change of each raw key of a rows event of `table` (event at `pos`)."""
    columns, (fixed, prefix), key = shape
    body = decode_event(data, fde).body
    present, present_after = body.columns_present, body.columns_present_after
    if not all(present) or (present_after is not None and not all(present_after)):
        table.scan = True  # the scan names the partial image
        return
    rows = body.rows_data
    base = pos + len(data) - fde.checksum_len - len(rows)  # the rows' offset in the file
    starts = [0] * len(columns)
    at, end = 0, len(rows)
    write = body.kind == "write"
    while at < end:
        start = at
        at = value_starts(rows, at, fixed, prefix, starts)
        raw = _raw_key(rows, key, starts, at)
        if raw is None:
            table.scan = True
            return
        table.add(raw, base + start, 0 if write else at - start)
        if present_after is not None:
            start = at
            at = value_starts(rows, at, fixed, prefix, starts)
            raw = _raw_key(rows, key, starts, at)
            if raw is None:
                table.scan = True
                return
            table.add(raw, 0, 0)


def _raw_key(rows: bytes, key: tuple[int, ...], starts: list, image_end: int) -> bytes | None:
    """The key columns' bytes of the image whose columns start at `starts` (None: a NULL)."""
    parts = []
    n = len(starts)
    for i in key:
        s = starts[i]
        if s < 0:
            return None
        e = image_end
        for j in range(i + 1, n):
            if starts[j] >= 0:
                e = starts[j]
                break
        parts.append(rows[s:e])
    return b"".join(parts)


class Replay:
    """A read's use of the index: its table, and the raw keys met in earlier segments (their
    keys are in the map already: no need to decode them again)."""

    def __init__(self, table: TableChanges) -> None:
        self.table = table
        self.names = names_of(table.db, table.name)
        self.key = tuple(table.key)
        self.seen: set[bytes] = set()
        self._columns: dict[bytes, list] = {}

    def needs(self, seg: SegmentIndex) -> TableSegment | None | bool:
        """What the read needs of `seg`: False when the scan must read it, None when the
        table has nothing in it, else its part of the index."""
        t = self.table
        if (t.db, t.name) in seg.ddl or t.picks is not None:
            # A DDL here, or one crossed already (a read as of a past point: the images now
            # in another shape than P's, `TableChanges.picks`): the scan projects them.
            return False
        part = seg.tables.get(self.names)
        if part is None:
            return None
        if part.scan or part.key != self.key or part.columns != t.columns:
            return False
        return part

    def apply(
        self,
        part: TableSegment,
        fde: FormatDescription,
        read: Callable[[int, int], bytes],
        turn: int = 256,
    ) -> Iterator[None]:
        """The segment's first changes into the read's map, as the scan would have put them;
        yields every `turn` keys decoded (the caller lets its loop run)."""
        columns = self._columns.get(part.map_body)
        if columns is None:
            columns = decode_event(part.map_event, fde).body.columns()
            self._columns[part.map_body] = columns
        table, seen = self.table, self.seen
        changes, key_of, first, key = table.changes, table.key_of, table.first, self.key
        keys = bytes(part.keys)
        view = memoryview(keys)
        fixed, prefix = layout(columns)
        starts = [0] * len(columns)
        start = decoded = 0
        for end, at, size in zip(part.key_ends, part.images_at, part.image_sizes, strict=True):
            raw = keys[start:end]
            if raw in seen:
                start = end
                continue
            seen.add(raw)
            pos, values = start, []
            for i in key:
                value, pos = decode_value(columns[i], view, pos, i)
                values.append(value)
            start = end
            decoded += 1
            if decoded % turn == 0:
                yield
            k = key_of(values)
            if k in changes:
                continue
            if not size:
                first(k, None)
                continue
            image = read(at, size)
            if len(image) != size or value_starts(image, 0, fixed, prefix, starts) != size:
                raise ValueError(f"the change index disagrees with {at}: rebuild it")
            first(k, Image(columns, image))
