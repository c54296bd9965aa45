"""The global binlog as the backfill reads it: over the dumper's MySQL protocol (the same dump
client the MergeSources use), decoded with the codec's slow path.

`scan` walks the binlog from a start position and answers, for a snapshot TSO T and the high
watermark H: the position right after T (where a consumer continues), and for every primary key
of the chosen tables touched in (T, H) its state just before the first such change (the
before-image; None when the change created the key). See docs/backfill.md for why that is
exactly the table at T.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pymysql

from backfill.columns import binlog_converter, key_value, row_converter
from backfill.errors import BackfillError
from backfill.tables import TableSpec
from cdc import admin_sql
from cdc.binlog.constants import FORMAT_DESCRIPTION_EVENT, QUERY_EVENT, TABLE_MAP_EVENT
from cdc.binlog.events import cts_mark_text, parse_cts
from cdc.binlog.fde import FormatDescription
from cdc.protocol import BinlogPosition, DumpClient, DumpError, DumpSettings
from cdc.protocol.sql_error import SqlError
from read_path import FirstImages, TableChanges

ROWS = frozenset({23, 24, 25, 30, 31, 32})
LOCAL_MARK = b"::L"


@dataclass(frozen=True, slots=True)
class Dumper:
    host: str
    port: int
    user: str
    password: str

    @property
    def where(self) -> str:
        return f"the dumper at {self.host}:{self.port}"

    def query(self, sql: str) -> list[tuple]:
        try:
            conn = admin_sql.connect(
                self.host, self.port, self.user, self.password, autocommit=False
            )
        except pymysql.err.MySQLError as exc:
            raise BackfillError(
                f"cannot reach {self.where} ({exc}): is the pipeline (`cdc start`) running?"
            ) from None
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def files(self) -> list[str]:
        return [r[0] for r in self.query("SHOW BINARY LOGS")]

    def retain(self, file: str) -> RetainedFrom:
        """Keep the dumper from purging `file` and later files (its retention and PURGE) while
        the returned hold is open: a session with `@cdc_retain_from` (docs/dumper.md,
        "Retention"), so the hand-off position read before the snapshot is still there when
        the binlog is scanned from it after the reads."""
        return RetainedFrom(self, file)

    def end(self) -> BinlogPosition:
        rows = self.query("SHOW MASTER STATUS")
        if not rows:
            raise BackfillError(f"{self.where} has no binlog yet: is the pipeline running?")
        return BinlogPosition(rows[0][0], int(rows[0][1]))


class RetainedFrom:
    """An open `@cdc_retain_from` session (`Dumper.retain`): `open()`, then `close()`."""

    def __init__(self, dumper: Dumper, file: str) -> None:
        self.dumper = dumper
        self.file = file
        self._conn = None

    def open(self) -> RetainedFrom:
        d = self.dumper
        try:
            self._conn = admin_sql.connect(d.host, d.port, d.user, d.password, autocommit=False)
            with self._conn.cursor() as cur:
                cur.execute("SET @cdc_retain_from = %s", (self.file,))
        except pymysql.err.MySQLError as exc:
            raise BackfillError(
                f"cannot reach {d.where} ({exc}): is `cdc start` running?"
            ) from None
        return self

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def mark_key(mark: bytes) -> tuple[int, int]:
    """Order of a CTS mark against a snapshot TSO: (tso, 0) for a CN transaction, (tso, 1) for
    a local one (it sorts after the CN transaction of the same TSO, as in the merge)."""
    tso = parse_cts(mark)
    if tso is None:
        raise BackfillError(f"not a CTS mark in the global binlog: {mark[:60]!r}")
    return tso, int(LOCAL_MARK in mark)


@dataclass(slots=True)
class Window:
    """What `scan` found."""

    after_snapshot: BinlogPosition  # right after the last transaction at or below T
    # per table (db.table): primary key → the row at T (a tuple) or None (absent at T)
    patches: dict[str, dict[tuple, tuple | None]] = field(default_factory=dict)
    transactions: int = 0
    first_mark: tuple[int, int] | None = None


class _Decoder:
    """Rows events of the chosen tables → first-touch states per key: the read path's
    `FirstImages` (the snapshot read's, the same rules), its rows converted as the DNs' reads
    give them."""

    def __init__(self, specs: list[TableSpec]):
        self.specs = {(s.db, s.name): s for s in specs}
        self.images = FirstImages([_changes(s) for s in specs])

    def feed(self, events: list[bytes], fde: FormatDescription, tso: int) -> None:
        try:
            for data in events:
                self.images.event(data, fde, f"TSO {tso}")
        except SqlError as exc:
            raise BackfillError(
                f"the backfill's read of the global binlog failed: {exc.message}"
            ) from None

    def patches(self) -> dict[str, dict[tuple, tuple | None]]:
        """Per table (db.table) that changed: primary key → the row at T, or None."""
        out = {}
        for name, table in self.images.tables.items():
            if table.changes:
                spec = self.specs[name]
                convert = row_converter(list(spec.columns), spec.qualified)
                out[spec.qualified] = {
                    key: None if image is None else convert(image.values())
                    for key, image in table.changes.items()
                }
        return out


def _changes(spec: TableSpec) -> TableChanges:
    """`spec`'s table for `FirstImages`: its key converted as `row_converter` converts it."""
    converters = [binlog_converter(spec.columns[i], spec.qualified) for i in spec.key_index]

    def key_of(values: list) -> tuple:
        return tuple(
            key_value(None if v is None else f(v)) for f, v in zip(converters, values, strict=True)
        )

    return TableChanges(spec.db, spec.name, list(spec.key_index), key_of, len(spec.columns))


async def _events(dumper: Dumper, start: BinlogPosition, idle_timeout: float) -> AsyncIterator:
    settings = DumpSettings(
        dumper.host,
        dumper.port,
        dumper.user,
        dumper.password,
        server_id=random.randrange(1 << 20, 1 << 30),  # unique among the dumper's clients
        name="global binlog",
        heartbeat_period=1.0,
        idle_timeout=idle_timeout,
        reconnect=False,
    )
    client = DumpClient(settings, start)
    try:
        async for batch in client.batches():
            for ev in batch:
                yield ev
    except DumpError as exc:
        raise BackfillError(f"reading the global binlog from {dumper.where}: {exc}") from None
    finally:
        await client.close()


def scan(
    dumper: Dumper,
    start: BinlogPosition,
    snapshot_tso: int,
    stop_tso: int,
    specs: list[TableSpec],
    timeout: float,
) -> Window:
    """Read from `start` until the transaction with TSO `stop_tso` (the high watermark)."""
    # Bounded as a whole: an idle dump only gets heartbeats, which the dump client swallows.
    try:
        return asyncio.run(
            asyncio.wait_for(_scan(dumper, start, snapshot_tso, stop_tso, specs, timeout), timeout)
        )
    except TimeoutError:
        raise BackfillError(
            f"the global binlog from {dumper.where} did not reach TSO {stop_tso} within "
            f"{timeout:.0f}s: is the pipeline running and keeping up?"
        ) from None


async def _scan(dumper, start, snapshot_tso, stop_tso, specs, timeout) -> Window:
    decoder = _Decoder(specs)
    snapshot = (snapshot_tso, 0)
    window = Window(after_snapshot=start)
    fde: FormatDescription | None = None
    pending: list[bytes] = []
    txn_start = start
    seen_after = False
    deadline = time.monotonic() + timeout
    async for ev in _events(dumper, start, idle_timeout=min(timeout, 30.0)):
        code = ev.type_code
        if code == FORMAT_DESCRIPTION_EVENT:
            fde = FormatDescription.parse(ev.data[19:])
            continue
        if code in ROWS or code == TABLE_MAP_EVENT or code == QUERY_EVENT:
            pending.append(ev.data)
        elif fde is not None and (mark := cts_mark_text(ev.data)) is not None:
            key = mark_key(mark)
            if window.first_mark is None:
                window.first_mark = key
            if key <= snapshot:
                if seen_after:
                    raise BackfillError(f"global binlog out of TSO order at {ev.file}:{ev.pos}")
                window.after_snapshot = BinlogPosition(ev.file, ev.end)
            else:
                if not seen_after:
                    window.after_snapshot = txn_start
                    seen_after = True
                if key[0] >= stop_tso:
                    window.patches = decoder.patches()
                    return window
                decoder.feed(pending, fde, key[0])
                window.transactions += 1
            pending = []
            txn_start = BinlogPosition(ev.file, ev.end)
        if time.monotonic() > deadline:
            break
    raise BackfillError(
        f"the global binlog from {dumper.where} did not reach TSO {stop_tso} within "
        f"{timeout:.0f}s (read up to {txn_start}): is the pipeline running and keeping up?"
    )


async def _first_mark(dumper: Dumper, file: str, timeout: float) -> tuple[int, int] | None:
    fde = None
    async for ev in _events(dumper, BinlogPosition(file, 4), idle_timeout=timeout):
        if ev.type_code == FORMAT_DESCRIPTION_EVENT:
            fde = FormatDescription.parse(ev.data[19:])
        elif fde is not None and (mark := cts_mark_text(ev.data)) is not None:
            return mark_key(mark)
    return None


def first_mark(dumper: Dumper, file: str, timeout: float = 10.0) -> tuple[int, int] | None:
    """The first CTS mark of `file` (None when it has no transaction yet)."""
    try:
        return asyncio.run(asyncio.wait_for(_first_mark(dumper, file, timeout), timeout))
    except TimeoutError:
        return None


def wait_for(dumper: Dumper, start: BinlogPosition, tso: int, timeout: float) -> None:
    """Block until the transaction with TSO `tso` is in the global binlog (after `start`)."""
    scan(dumper, start, tso - 1, tso, [], timeout)
