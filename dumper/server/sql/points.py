"""Reads as of a past point (docs/snapshot-reads.md, "As of a past point"): the point as a
statement writes it (`AS OF TSO n`, `AS OF TIMESTAMP '…'`, `AS OF GTID '…'`, `AS OF 'file':pos`,
or any of these as one string), its errors as MySQL errors, and `PointResolver`, which turns it
into the position a snapshot read starts from. `history.resolve` walks files in Python (seconds
for a 512 MB file): it runs in a worker thread, never on the loop the sessions and dumps share,
and what it resolved is kept, since a boundary once resolved never moves."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import OrderedDict
from collections.abc import Callable

from binlog_writer import layout
from cdc import tso_layout
from dumper.server.handlers import SqlError
from dumper.server.sql.cursor import Cursor
from dumper.server.store.binlog_files import BinlogFiles
from history import (
    Point,
    PointBeforeOldest,
    PointError,
    PointInFuture,
    PointSpec,
    RetainedFiles,
    parse_point,
    resolve,
)

ER_WRONG_VALUE = 1525  # MySQL's "Incorrect %s value": malformed, ambiguous, inside a transaction
ER_GC_TOO_EARLY = 9006  # TiDB's, for a read older than what it keeps: before the oldest file
ER_AS_OF_FUTURE = 8135  # TiDB's "invalid as of timestamp" for a point not reached yet
ER_CANT_CHANGE_TX_CHARACTERISTICS = 1568  # AS OF inside a transaction (pinned already)
CACHED = 256  # resolved points kept (a boundary never moves; one no longer readable is dropped)
MERGED_WAIT_S = 10.0  # a TSO just past: how long to wait for the merge to pass it


def parse_as_of(cur: Cursor) -> PointSpec:
    """The point after `AS OF` (the cursor past those words); malformed: 1525 at once."""
    tok = cur.next()
    word = tok.word()
    if word == "TSO":
        number = cur.next().text if not cur.at_end() else ""
        text = f"TSO {number}"  # `TSO` alone: malformed, said so
    elif word in ("TIMESTAMP", "GTID"):
        text = f"{word} '{cur.string()}'"
    elif tok.kind == "str":
        text = f"'{tok.value}':{cur.next().text}" if cur.accept(":") else tok.value
    elif tok.kind == "num":
        text = tok.text  # a bare number: parse_point says how to write it
    else:
        cur.i -= 1
        raise cur.error()
    return checked(text)


def checked(text: str) -> PointSpec:
    try:
        return parse_point(text)
    except PointError as exc:
        raise point_error(exc) from None


def point_error(exc: PointError) -> SqlError:
    """A point that names no readable boundary, as the MySQL error a client shows."""
    if isinstance(exc, PointBeforeOldest):
        return SqlError(f"AS OF: {exc}", ER_GC_TOO_EARLY, "HY000")
    if isinstance(exc, PointInFuture):
        return SqlError(f"AS OF: {exc}", ER_AS_OF_FUTURE, "HY000")
    return SqlError(f"Incorrect AS OF value: {exc}", ER_WRONG_VALUE, "HY000")


def in_transaction_error() -> SqlError:
    return SqlError(
        "AS OF cannot be used inside a transaction: its reads are pinned already (COMMIT first, "
        "or start it with START TRANSACTION READ ONLY AS OF …)",
        ER_CANT_CHANGE_TX_CHARACTERISTICS,
        "25001",
    )


def _order(position: tuple[str, int]) -> tuple[int, int]:
    return layout.file_number(position[0]), position[1]


class PointResolver:
    """Points → positions of the served files, off the loop, cached (one per server)."""

    def __init__(self, files: BinlogFiles, merged_tso: Callable[[], int | None]) -> None:
        self.files = files
        self.merged_tso = merged_tso  # the leader's merge progress (None: unknown)
        self._cache: OrderedDict[tuple[str, object], Point] = OrderedDict()

    async def resolve(self, spec: PointSpec, end: tuple[str, int]) -> tuple[str, int]:
        """The position of `spec`, at or before `end` (what the server serves now); a
        PointError's SqlError otherwise."""
        key = (spec.kind, spec.value)
        point = self._cache.get(key)
        if point is not None and point.file in self.files.readable_names():
            self._cache.move_to_end(key)
        else:
            point = await self._resolved(spec, end)
            self._cache[key] = point
            while len(self._cache) > CACHED:
                self._cache.popitem(last=False)
        position = (point.file, point.pos)
        if _order(position) > _order(end):
            # Written but not yet served (an HA leader waits for its followers' copies).
            raise point_error(
                PointInFuture(
                    f"point {spec.text!r} is at {point}, past what this server serves now "
                    f"('{end[0]}':{end[1]}); try again in a moment"
                )
            )
        return position

    async def _resolved(self, spec: PointSpec, end: tuple[str, int]) -> Point:
        files = RetainedFiles(self.files.dir, self.files.base, self.files.archive)
        try:
            return await asyncio.to_thread(resolve, spec, files)
        except PointInFuture as exc:
            bound = self._bound(spec)
            if bound is None or not await self._merged_past(bound):
                raise point_error(exc) from None
            return await asyncio.to_thread(_passed, spec, files, bound)
        except PointError as exc:
            raise point_error(exc) from None

    @staticmethod
    def _bound(spec: PointSpec) -> int | None:
        """The TSO a TSO or TIMESTAMP point names, if it is not after now (else None)."""
        if spec.kind == "tso":
            bound = spec.value
        elif spec.kind == "time":
            assert isinstance(spec.value, dt.datetime)
            ms = int(spec.value.timestamp() * 1000)
            bound = tso_layout.compose(ms, tso_layout.LOGICAL_MASK)  # its last TSO
        else:
            return None
        assert isinstance(bound, int)
        return bound if tso_layout.physical_ms(bound) <= time.time() * 1000 else None

    async def _merged_past(self, bound: int) -> bool:
        """Whether the leader's merge passes `bound` within MERGED_WAIT_S (a heartbeat
        moves it even while nobody writes)."""
        deadline = time.monotonic() + MERGED_WAIT_S
        while True:
            merged = self.merged_tso()
            if merged is not None and merged >= bound:
                return True
            if merged is None or time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)


def _passed(spec: PointSpec, files: RetainedFiles, bound: int) -> Point:
    """The point of a TSO `bound` the merge has passed while the files hold no transaction
    after it yet: every transaction at or below it is written, so the state there is the
    newest transaction's end, unless one above it lands meanwhile (then resolved as usual)."""
    while True:
        fresh = RetainedFiles(files.directory, files.base, files.archive)
        try:
            return resolve(spec, fresh)
        except PointInFuture:
            point = fresh.end_point()
            if point.tso is None or point.tso <= bound:
                return point
