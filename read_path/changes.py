"""The global binlog from a statement's position P, as the server's files hold it: for one
logical table, the state at P of every primary key changed since (`first_images.py`: the
before-image of its first change; None when that change created the key), and the largest CTS
mark read, which tells when a high watermark TSO is covered. The map only grows and an entry never changes once set, so
one scan serves every chunk of a statement, continuing where it stopped (docs/snapshot-reads.md).
Where the server has indexed the files (`change_index.py`), a segment the index covers is taken
from it instead of scanned: only the first change in it of each key not met yet is decoded.

Reading past a chunk's high watermark is harmless: a key first changed after H was read
unchanged, and its before-image is that same state at P."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cdc.binlog.constants import FORMAT_DESCRIPTION_EVENT, QUERY_EVENT, TABLE_MAP_EVENT
from cdc.binlog.events import cts_mark_text, decode_event, parse_cts
from cdc.binlog.fde import FormatDescription
from cdc.protocol.sql_error import SqlError
from read_path.change_index import Replay, SegmentIndex
from read_path.first_images import ROWS, FirstImages, Image, Key, Shape, TableChanges, ddl_target
from read_path.served import ChangeIndex, ServedFiles

ER_UNKNOWN = 1105
EVENTS_PER_TURN = 256  # ~1 ms of decoding between the loop's turns
DECODED = ROWS | {TABLE_MAP_EVENT, QUERY_EVENT}  # what `FirstImages` reads
WHOLE_SEGMENT = 16 << 20  # an indexed segment up to this size is read in one go


class ChangedKeys:
    def __init__(
        self,
        files: ServedFiles,
        start: tuple[str, int],
        table: tuple[str, str],
        key: list[int],
        key_of: Callable[[list], Key],
        columns: int,
        later: list[Shape] | None = None,
        index: ChangeIndex | None = None,
    ) -> None:
        self.files = files
        self.index = index  # the changed keys' index, where built (change_index.py)
        self.file, self.pos = start
        # `later`: the shapes after each DDL a read as of a past point crosses (past_shape.py)
        self.table = TableChanges(*table, key, key_of, columns, later=list(later or ()))
        self.images = FirstImages([self.table])
        self.changes: dict[Key, Image | None] = self.table.changes
        self.added: list[Key] = self.table.added  # the keys of `changes`, in the order they came
        self.max_mark = 0  # the largest CTS mark's TSO read so far
        self.indexed = 0  # segments answered by the index (the rest of the binlog is scanned)
        self._fde: FormatDescription | None = None
        self._replay = Replay(self.table)
        self._budget = EVENTS_PER_TURN

    async def advance(self) -> None:
        """Read every whole event written since the last call, letting the loop's other
        sessions and dumps run every EVENTS_PER_TURN events (a transaction pinned long ago
        rescans from its P with each statement). A segment the index covers is taken from it
        (only its first changes of keys not met yet are decoded), the rest scanned."""
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
            segments = [] if self.index is None else self.index.segments(self.file, self.pos)
            for seg in segments:
                await self._scan(seg.begin)
                if self.pos != seg.begin:
                    break  # the file ends before it: it is not this file's index
                await self._segment(seg)
            await self._scan(None)
            if not later:
                return
            # A later file existed before this one was read: this one was finished.
            self.file, self.pos, self._fde = later[0], 4, None

    async def _scan(self, until: int | None) -> None:
        """The events from `pos` up to `until` (None: the file's last whole event)."""
        for ev in self.files.events(self.file, self.pos):
            if until is not None and ev.pos >= until:
                return
            self._event(ev.data, f"{self.file}:{ev.pos}")
            self.pos = ev.pos + len(ev.data)
            self._budget -= 1
            if self._budget <= 0:
                await asyncio.sleep(0)
                self._budget = EVENTS_PER_TURN

    async def _segment(self, seg: SegmentIndex) -> None:
        """A segment the index covers: the table's first changes from it, or (what the index
        cannot answer exactly) its events scanned."""
        part = self._replay.needs(seg)
        if part is False:
            await self._scan(seg.end)
            return
        if part is not None:
            assert self.index is not None and self._fde is not None
            with self.index.reader(self.file) as read:
                image = read
                begin = seg.begin
                if seg.end - begin <= WHOLE_SEGMENT:
                    # The segment's bytes in one read, its images cut from them (one read per
                    # image in a segment a big transaction made big).
                    view = memoryview(read(begin, seg.end - begin))

                    def image(at: int, size: int) -> bytes:
                        return bytes(view[at - begin : at - begin + size])

                for _ in self._replay.apply(part, self._fde, image):
                    await asyncio.sleep(0)
        self.max_mark = max(self.max_mark, seg.max_mark)
        self.pos = seg.end
        self.indexed += 1

    def _event(self, data: bytes, where: str) -> None:
        code = data[4]
        if code in DECODED:
            assert self._fde is not None
            self.images.event(data, self._fde, where)
        elif code == FORMAT_DESCRIPTION_EVENT:
            self._fde = FormatDescription.parse(data[19:])
        elif (mark := cts_mark_text(data)) is not None:
            tso = parse_cts(mark)
            if tso is not None and tso > self.max_mark:
                self.max_mark = tso


def _fde(files: ServedFiles, name: str) -> FormatDescription:
    return FormatDescription.parse(files.read_fde(name).data[19:])


async def first_ddl(
    files: ServedFiles, start: tuple[str, int], db: str, table: str, skip: int = 0
) -> tuple[str, str] | None:
    """The first DDL on `db.table` in the served files from `start` (after `skip` others):
    (where, its SQL), None if there is none. For a read whose rows and binlog images disagree
    in shape: which DDL did it (a QUERY is decoded only when its first word is a DDL's; the
    loop's other sessions run every EVENTS_PER_TURN events)."""
    names = files.names()
    if start[0] not in names:
        return None
    budget = EVENTS_PER_TURN
    for name in names[names.index(start[0]) :]:
        fde = _fde(files, name)
        for ev in files.events(name, start[1] if name == start[0] else 4):
            budget -= 1
            if budget <= 0:
                await asyncio.sleep(0)
                budget = EVENTS_PER_TURN
            if ev.data[4] != QUERY_EVENT:
                continue
            target = ddl_target(decode_event(ev.data, fde).body)
            if target is not None and target[:2] == (db, table):
                if skip == 0:
                    return f"{name}:{ev.pos}", target[2]
                skip -= 1
    return None
