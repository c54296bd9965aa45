"""One SELECT over a logical table, as of a global binlog position P (docs/snapshot-reads.md):
its plan (columns, key, the SQL of a page), then chunk after chunk as the reads ahead queue
them (`read_ahead.py`: the rows read up to the chunk's bound and a high watermark, a TSO from
the GMS): the watermark waited for in the global binlog, the chunk's rows at P
(`chunks.take_chunk`), streamed. COUNT(*) / MIN / MAX are folded over those rows."""

from __future__ import annotations

import bisect
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace

from cdc.cn_protocol.catalogue import LogicalTable
from cdc.protocol.constants import ColumnType as T
from cdc.protocol.sql_error import SqlError
from read_path.changes import ChangedKeys, Image
from read_path.chunks import Key, take_chunk
from read_path.image_text import ImageSpeller
from read_path.order import Sorter, check_keep, row_order
from read_path.read_ahead import ReadAhead
from read_path.request import TableSelect, unsupported
from read_path.served import Progress, ServedFiles
from read_path.source import DnReader, Shard, SnapshotSource
from read_path.values import (
    INTEGER_TYPES,
    ColumnDef,
    integer,
    order_key,
    sort_key,
    split_fields,
    text_row,
    text_value,
)
from read_path.where import columns_of, identifier, matches, to_sql

log = logging.getLogger(__name__)
PAGE_ROWS = 10_000  # per shard read
# The rows a statement holds (read and not yet sent): at most this many pages per shard
# (read_ahead.py), enough to read on through a few chunks' watermark waits.
READ_AHEAD_PAGES = 4
SORT_ROWS = 100_000  # rows held for an ORDER BY other than the key (read_path/order.py)
# The global binlog reaches a fresh TSO within one heartbeat plus the pipeline's latency; this
# long means the pipeline is not merging.
WATERMARK_WAIT_S = 30.0
ER_UNKNOWN = 1105
ER_BAD_FIELD = 1054
_MEMBERS = re.compile(r"'((?:[^']|'')*)'")


@dataclass(slots=True)
class _Plan:
    columns: list[ColumnDef]  # the table's, in order (SELECT * on a shard)
    index: dict[str, int]  # lower-case name → position
    members: dict[int, tuple[str, ...]]  # ENUM/SET values by position
    key: list[int]  # primary key positions
    data: list[int]  # the positions a page reads after the key
    # Integer keys order the same in Python as on the DN, so their chunks may be bounded; any
    # other key is read in one page per shard (one chunk, no bound the DN would compare), its
    # rows keyed by their order in Python (`_order_of`).
    integer_key: bool
    # The statement's rows come in primary-key order (no ORDER BY, or a prefix of the key
    # ascending): streamed as read; otherwise sorted (`order.Sorter`).
    key_order: bool = True
    shown: int = 0  # of `data`, the fields the result shows (the rest: ORDER BY columns)
    # A binary-protocol read: FLOAT data columns are read as DOUBLEs (CAST, exact), as the
    # text protocol's 6 digits lose a FLOAT's last bits, which the binary row carries.
    exact_floats: bool = False
    result: list[ColumnDef] = field(default_factory=list)
    # A key not made of integers: each column's text → its order (`_order_of`).
    key_orders: list[Callable[[bytes], object]] = field(default_factory=list)


class SnapshotRead:
    """The rows of `stmt` as of `position`; `open()` the result columns, then `rows()`."""

    def __init__(
        self,
        source: SnapshotSource,
        files: ServedFiles,
        progress: Progress,
        stmt: TableSelect,
        db: str,
        position: tuple[str, int],
        page_rows: int = PAGE_ROWS,
        sort_rows: int = SORT_ROWS,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.source = source
        self.files = files
        self.progress = progress
        self.stmt = stmt
        self.db = db
        self.position = position
        self.page_rows = max(1, page_rows)
        self.sort_rows = max(1, sort_rows)
        self.on_close = on_close  # the statement's end: its position no longer held from purge
        self._readers: dict[int, DnReader] = {}
        self._table: LogicalTable | None = None
        self._shards: list[Shard] = []
        self._plan: _Plan | None = None

    # -- plan ----------------------------------------------------------------------------------
    async def open(self, binary: bool = False) -> list[ColumnDef]:
        """The result's columns; `binary`: its rows are for the binary protocol (FLOATs
        exact)."""
        try:
            with self._as_sql_error():
                return await self._open(binary)
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def _as_sql_error(self) -> Iterator[None]:
        """A failure we did not foresee is the statement's ERR (logged), never the end of the
        client's connection."""
        try:
            yield
        except SqlError:
            raise
        except Exception as exc:
            log.exception("snapshot read of %s.%s failed", self.db, self.stmt.table)
            raise SqlError(
                f"reading {self.db}.{self.stmt.table} failed: {exc!r} (the dumper's log has "
                "the details)",
                ER_UNKNOWN,
                "HY000",
            ) from None

    async def _open(self, binary: bool) -> list[ColumnDef]:
        stmt = self.stmt
        table = await self.source.table(self.db, stmt.table)
        if table is None:
            raise SqlError(f"Table '{self.db}.{stmt.table}' doesn't exist", 1146, "42S02")
        self._table = table
        self._shards = self.source.shards(table)
        first = self._shards[0]
        reader = await self._reader(first.dn)
        defs, _ = await reader.query(f"SELECT * FROM {first.name} LIMIT 0")
        columns = [ColumnDef.parse(p) for p in defs]
        index = {c.org_name.decode().lower(): i for i, c in enumerate(columns)}
        _, described = await reader.query(f"SHOW FULL COLUMNS FROM {first.name}")
        members: dict[int, tuple[str, ...]] = {}
        for row in described:
            (name, type_, declared), _ = split_fields(row, 3)
            at = index[(name or b"").decode().lower()]
            text = (type_ or b"").decode()
            if text.startswith(("enum(", "set(")):
                members[at] = tuple(m.replace("''", "'") for m in _MEMBERS.findall(text))
            if declared:  # the result sets' packets name the connection's collation instead
                columns[at] = replace(columns[at], declared=declared.decode())
        _, keys = await reader.query(f"SHOW KEYS FROM {first.name} WHERE Key_name = 'PRIMARY'")
        key_names = [split_fields(r, 5)[0][4] for r in keys]
        key = [index[(k or b"").decode().lower()] for k in key_names]
        if not key:
            raise unsupported("a table without a primary key")
        integer_key = all(columns[i].type in INTEGER_TYPES for i in key)
        # An aggregate over all the rows does not care for their order; the split query's
        # over its first rows does.
        key_order = self._check_columns(index, key) or (stmt.aggregate and stmt.first is None)
        for i in self._compared(index, [] if integer_key else key):
            if not columns[i].numeric:
                columns[i].collation.check()  # refused before a row is read, not midway
        data = self._data_positions(index, len(columns))
        shown = len(data)
        if not key_order:
            data += [index[c] for c, _ in stmt.order_by if index[c] not in data]
            check_keep(self._keep(), self.sort_rows)
        plan = _Plan(columns, index, members, key, data, integer_key, key_order, shown, binary)
        if not integer_key:  # ordered as the DN orders it: an ENUM by its index
            plan.key_orders = [order_key(columns[i], members.get(i, ())) for i in key]
        plan.result = await self._result_columns(reader, first, plan)
        self._plan = plan
        return plan.result

    def _check_columns(self, index: dict[str, int], key: list[int]) -> bool:
        """Unknown columns refused as MySQL does; whether ORDER BY is the primary key's order."""
        stmt = self.stmt

        def known(column: str, clause: str) -> None:
            if column not in index:
                raise SqlError(f"Unknown column '{column}' in '{clause}'", ER_BAD_FIELD, "42S22")

        for item in stmt.items:
            if item.column is not None:
                known(item.column, "field list")
        if stmt.where is not None:
            for column in columns_of(stmt.where):
                known(column, "where clause")
        key_order = True
        for i, (column, descending) in enumerate(stmt.order_by):
            known(column, "order clause")
            if descending or i >= len(key) or index[column] != key[i]:
                key_order = False
        return key_order

    def _compared(self, index: dict[str, int], key: list[int]) -> set[int]:
        """The columns whose values the read orders or compares in Python (`key`: a key that
        is not made of integers, ordered by its values): WHERE, ORDER BY, MIN/MAX."""
        stmt = self.stmt
        out = set(key) | {index[c] for c, _ in stmt.order_by}
        out |= {index[i.column] for i in stmt.items if i.kind in ("MIN", "MAX") and i.column}
        if stmt.where is not None:
            out |= {index[c] for c in columns_of(stmt.where)}
        return out

    def _keep(self) -> int | None:
        """How many rows of the sorted order the statement can show (LIMIT, or the split
        query's first rows), after its offset; None: all."""
        stmt = self.stmt
        shown = stmt.first if stmt.aggregate else stmt.limit
        return None if shown is None else stmt.offset + shown

    def _data_positions(self, index: dict[str, int], count: int) -> list[int]:
        out: list[int] = []
        for item in self.stmt.items:
            if item.kind == "*":
                out.extend(range(count))
            elif item.kind in ("column", "MIN", "MAX"):
                out.append(index[item.column])  # type: ignore[index]
        return out

    async def _result_columns(self, reader: DnReader, shard: Shard, plan: _Plan) -> list[ColumnDef]:
        """The DN's definitions for the select list, renamed to the logical table."""
        stmt = self.stmt
        parts = []
        for item in stmt.items:
            if item.kind == "*":
                parts.append(
                    "*"
                    if len(stmt.items) == 1
                    else ", ".join(identifier(c.org_name.decode()) for c in plan.columns)
                )
            elif item.kind == "column":
                parts.append(f"{identifier(item.column)} AS {identifier(item.name)}")  # type: ignore[arg-type]
            elif item.kind == "COUNT":
                parts.append(f"COUNT(*) AS {identifier(item.name)}")
            else:
                parts.append(f"{item.kind}({identifier(item.column)}) AS {identifier(item.name)}")  # type: ignore[arg-type]
        defs, _ = await reader.query(f"SELECT {', '.join(parts)} FROM {shard.name} LIMIT 0")
        alias = stmt.alias or stmt.table
        return [ColumnDef.parse(p).renamed(self.db, stmt.table, alias) for p in defs]

    # -- rows ----------------------------------------------------------------------------------
    async def rows(self) -> AsyncIterator[list[bytes]]:
        """The text rows, a chunk (a list) at a time: the caller sends a batch in one pass."""
        plan = self._plan
        assert plan is not None and self._table is not None
        stmt = self.stmt
        try:
            with self._as_sql_error():
                async with contextlib.aclosing(self._rows(plan, stmt)) as batches:
                    async for rows in batches:
                        yield rows
        finally:
            self.close()

    async def _rows(self, plan: _Plan, stmt: TableSelect) -> AsyncIterator[list[bytes]]:
        if stmt.limit == 0:
            return
        if stmt.aggregate:
            row = await self._aggregate(plan)
            if stmt.offset == 0 or stmt.first is not None:
                yield [row]
            return
        chunks = self._at_p(plan) if plan.key_order else self._sorted_rows(plan)
        async with contextlib.aclosing(_window(chunks, stmt.offset, stmt.limit)) as window:
            async for chunk in window:
                if chunk:
                    yield chunk

    async def _sorted(self, plan: _Plan) -> AsyncIterator[list]:
        """The rows' fields in the statement's order, a chunk at a time: key order as read, or
        all of them sorted (bounded: read_path/order.py). Each async generator of the read is
        closed by its consumer, so its reads stop with the statement, not when collected."""
        if plan.key_order:
            async with contextlib.aclosing(self._at_p(plan, split=True)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        columns = []
        for column, descending in self.stmt.order_by:
            at = plan.data.index(plan.index[column])
            members = plan.members.get(plan.data[at], ())
            columns.append((at, descending, order_key(plan.columns[plan.data[at]], members)))
        sorter = Sorter(row_order(columns), self.sort_rows, self._keep())
        async with contextlib.aclosing(self._at_p(plan, split=True)) as chunks:
            async for chunk in chunks:
                sorter.add(chunk)
        rows = sorter.sorted()
        for start in range(0, len(rows), self.page_rows):
            yield rows[start : start + self.page_rows]

    async def _sorted_rows(self, plan: _Plan) -> AsyncIterator[list[bytes]]:
        async with contextlib.aclosing(self._sorted(plan)) as chunks:
            async for chunk in chunks:
                yield [text_row(fields[: plan.shown]) for fields in chunk]

    async def _aggregate(self, plan: _Plan) -> bytes:
        """COUNT(*) / MIN / MAX over the rows; the split query's over its first rows only
        (`first`, after `offset`, in its order)."""
        items = self.stmt.items
        count = 0
        best: list[tuple[object, bytes] | None] = [None] * len(items)
        data_at = {}  # item index → its field in a page's data
        j = 0
        for i, item in enumerate(items):
            if item.kind in ("MIN", "MAX"):
                data_at[i] = j
                j += 1
        stmt = self.stmt
        skip, left = (0, None) if stmt.first is None else (stmt.offset, stmt.first)
        async with contextlib.aclosing(_window(self._sorted(plan), skip, left)) as window:
            async for chunk in window:
                for fields in chunk:
                    count += 1
                    for i, at in data_at.items():
                        text = fields[at]
                        if text is None:
                            continue
                        col = plan.columns[plan.data[at]]
                        k = sort_key(col, text)
                        cur = best[i]
                        if cur is None or (k < cur[0] if items[i].kind == "MIN" else k > cur[0]):  # type: ignore[operator]
                            best[i] = (k, text)
        out: list[bytes | None] = []
        for i, item in enumerate(items):
            if item.kind == "COUNT":
                out.append(str(count).encode())
            else:
                b = best[i]
                out.append(None if b is None else b[1])
        return text_row(out)

    async def _at_p(self, plan: _Plan, *, split: bool = False) -> AsyncIterator:
        """The table's rows at P matching the WHERE, in key order, a chunk (a list) at a time:
        text rows of the data columns (or their fields, `split`)."""
        ndata = len(plan.data)
        changes = ChangedKeys(
            self.files,
            self.position,
            (self._table.db, self._table.name),  # type: ignore[union-attr]
            plan.key,
            _key_of(plan),
            len(plan.columns),
        )

        # Each table map's columns → its speller (changes.py holds one list per distinct map,
        # for the whole read: an id is not reused while it is in here).
        spellers: dict[int, ImageSpeller] = {}
        every = list(range(len(plan.columns)))
        where = self.stmt.where

        def render(before: Image):
            speller = spellers.get(id(before.columns))
            if speller is None or speller.columns is not before.columns:
                speller = spellers[id(before.columns)] = ImageSpeller(
                    before.columns, plan.columns, plan.members, plan.exact_floats
                )
            if where is None and not split:
                return speller.row(before.data, plan.data)
            texts = split_fields(speller.row(before.data, every), len(every))[0]

            def lookup(column: str):
                i = plan.index[column]
                return plan.columns[i], texts[i]

            if not matches(where, lookup):
                return None
            fields = [texts[i] for i in plan.data]
            return fields if split else text_row(fields)

        shards = self._shards
        page_rows = self.page_rows
        if not plan.integer_key:
            page_rows += 1  # one more than allowed: tells a shard that does not fit
        elif plan.key_order and (keep := self._keep()) is not None:
            page_rows = max(1, min(page_rows, keep))

        async def read_page(i: int, after: Key | None) -> list[tuple[Key, object]]:
            """(key, the data columns' text row, or its fields when `split`) of the next page
            of shard i."""
            page = await self._page(plan, shards[i], after, page_rows)
            if not plan.integer_key:
                if len(page) == page_rows:
                    raise unsupported(
                        f"more than snapshot_page_rows ({page_rows - 1}) rows in a shard of a "
                        "table whose primary key is not made of integers"
                    )
                # Keyed by their order (the collation's), as the before-images are, so that
                # the shards merge in the DN's order and a key is found whatever its spelling.
                page = [(_order_of(plan, key), data) for key, data in page]
            if split:
                return [(key, split_fields(data, ndata)[0]) for key, data in page]
            return page

        by_dn: dict[int, list[int]] = {}
        for i, shard in enumerate(shards):
            by_dn.setdefault(shard.dn, []).append(i)
        reads = ReadAhead(
            list(by_dn.values()),
            read_page,
            page_rows,
            READ_AHEAD_PAGES * len(shards) * page_rows,
            self.source.tso,
        )
        reads.start()
        try:
            lo: Key | None = None
            # The changed keys above `lo`, sorted: a chunk looks at its own range only (the
            # map may hold many keys; a chunk would otherwise walk all of them).
            ahead: list[Key] = []
            seen = 0
            while True:
                # Chunk (lo, hi]: every key up to hi was read from every shard before its
                # TSO `high` was taken (read_ahead.py); later reads hold keys above hi only.
                hi, current, high = await reads.next_chunk()
                await self._watermark(changes, high)
                for key in changes.added[seen:]:
                    if lo is None or key > lo:  # one at or below lo was emitted from its read
                        bisect.insort(ahead, key)
                seen = len(changes.added)
                mine = len(ahead) if hi is None else bisect.bisect_right(ahead, hi)
                chunk = take_chunk(current, lo, hi, changes.changes, render, ahead[:mine])
                del ahead[:mine]
                yield [payload for _key, payload in chunk]
                reads.release(sum(len(rows) for rows in current))
                if hi is None:
                    return
                lo = hi
        finally:
            reads.close()

    async def _page(
        self, plan: _Plan, shard: Shard, after: Key | None, rows: int
    ) -> list[tuple[Key, bytes]]:
        """(key, the data columns' text row) of the next rows of a shard, in key order."""
        names = [identifier(plan.columns[i].org_name.decode()) for i in plan.key]
        data = [_data_column(plan, i) for i in plan.data]
        conds = []
        if after is not None:
            conds.append(_after(names, after))
        if self.stmt.where is not None:
            conds.append(f"({to_sql(self.stmt.where)})")
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        sql = (
            f"SELECT {', '.join(names + data)} FROM {shard.name}{where} "
            f"ORDER BY {', '.join(names)} LIMIT {rows}"
        )
        reader = await self._reader(shard.dn)
        return await reader.keyed_page(sql, len(plan.key), plan.integer_key)

    async def _watermark(self, changes: ChangedKeys, high: int) -> None:
        """`high`, a TSO H taken after the reads: the global binlog read until a CTS mark ≥ H
        (or the merged TSO past it): every change any read saw is then in `changes`
        (docs/snapshot-reads.md, step 3)."""
        deadline = time.monotonic() + WATERMARK_WAIT_S
        while True:
            # The leader's merged TSO, read before the scan: once past H, every transaction
            # below H is in the files this scan reads (heartbeats move it, though they are
            # never written: an idle binlog gets no CTS mark past H).
            merged = self.progress.merged_tso()
            await changes.advance()
            if changes.max_mark >= high or (merged is not None and merged >= high):
                return
            if time.monotonic() > deadline:
                raise SqlError(
                    f"the global binlog did not reach the read's high watermark (TSO {high}) "
                    f"within {WATERMARK_WAIT_S:.0f} s (read up to {changes.file}:{changes.pos}): "
                    "is the pipeline merging? (its heartbeats advance the binlog)",
                    ER_UNKNOWN,
                    "HY000",
                )
            await self.progress.wait(0.05)

    async def _reader(self, dn: int) -> DnReader:
        reader = self._readers.get(dn)
        if reader is None:
            reader = self._readers[dn] = await self.source.reader(dn)
        return reader

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        if self.on_close is not None:
            self.on_close()
            self.on_close = None


async def _window(chunks: AsyncIterator[list], skip: int, left: int | None) -> AsyncIterator[list]:
    """The chunks' rows after the first `skip`, `left` of them at most (None: all): LIMIT
    [offset,] n, or the split query's first rows. `chunks` is closed at the end (its reads
    stop at once, not when it is collected)."""
    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
        async for chunk in chunks:
            if skip:
                taken = min(skip, len(chunk))
                skip -= taken
                chunk = chunk[taken:]
            if left is not None:
                chunk = chunk[:left]
                left -= len(chunk)
            yield chunk
            if left is not None and left <= 0:
                return


def _after(names: list[str], key: Key) -> str:
    """`key` < (the columns), spelled as ranges the optimizer reads on the primary key:
    `a > x OR (a = x AND b > y)`."""
    ors = []
    for n in range(len(names)):
        eq = [f"{names[i]} = {key[i]}" for i in range(n)]
        ors.append("(" + " AND ".join([*eq, f"{names[n]} > {key[n]}"]) + ")")
    return "(" + " OR ".join(ors) + ")"


def _data_column(plan: _Plan, i: int) -> str:
    """Column i as a page reads it: a FLOAT of a binary read as the DOUBLE it converts to
    exactly (its text then has the digits of every bit)."""
    col = plan.columns[i]
    name = identifier(col.org_name.decode())
    return f"CAST({name} AS DOUBLE)" if plan.exact_floats and col.type == T.FLOAT else name


def _key_of(plan: _Plan) -> Callable[[list], tuple]:
    """A before-image's key values (decoded, in key order) → its key as a page holds it; one
    signed integer column (the usual key) as it is, with no call per value."""
    if plan.integer_key and len(plan.key) == 1 and not plan.columns[plan.key[0]].unsigned:
        return tuple
    return lambda values: tuple(
        _key_value(plan, i, v) for i, v in zip(plan.key, values, strict=True)
    )


def _key_value(plan: _Plan, i: int, value: object) -> object:
    """A key column of a before-image as a page's key holds it (an int, or its order)."""
    col = plan.columns[i]
    if plan.integer_key:
        return integer(col, value)  # type: ignore[arg-type]
    text = text_value(col, value, plan.members.get(i, ()))
    return plan.key_orders[plan.key.index(i)](text)  # type: ignore[arg-type]


def _order_of(plan: _Plan, key: tuple) -> tuple:
    """A key that is not made of integers, as read from a page (each column's text), by its
    columns' order as the DN's ORDER BY gives it: numbers by value, strings under their
    collation (`collation.py`), an ENUM by its index."""
    return tuple(order(text) for order, text in zip(plan.key_orders, key, strict=True))
