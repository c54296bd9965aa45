"""One SELECT over a logical table, as of a global binlog position P (docs/snapshot-reads.md):
its plan (`plan.py`), then its rows at P chunk by chunk (`at_p.py`), in key order as read or
sorted (`order.py`), LIMITed or folded into COUNT(*) / MIN / MAX (`fold.py`). `open()` gives the
result's columns, `rows()` the rows; an unforeseen failure is the statement's ERR."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator

from cdc.cn_protocol.catalogue import LogicalTable
from cdc.protocol.constants import ColumnType
from cdc.protocol.sql_error import SqlError
from read_path.at_p import rows_at_p
from read_path.changes import ChangedKeys
from read_path.chunks import Key
from read_path.fold import aggregate, window
from read_path.order import Sorter, row_order
from read_path.pages import key_of, page_sql
from read_path.past_shape import PastShape, past_shape
from read_path.plan import Plan, keep, plan
from read_path.request import TableSelect
from read_path.served import ChangeIndex, Progress, ServedFiles
from read_path.source import DnReader, Shard, SnapshotSource
from read_path.values import ColumnDef, order_key, text_row

log = logging.getLogger(__name__)
PAGE_ROWS = 10_000  # per shard read
SORT_ROWS = 100_000  # rows held for an ORDER BY other than the key (read_path/order.py)
ER_UNKNOWN = 1105


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
        past: bool = False,
        index: ChangeIndex | None = None,
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
        # A read as of a past point: a DDL on the table since is crossed in the table's shape
        # there, or refused (past_shape.py); at the end there is none to look for.
        self.past = past
        self._shape: PastShape | None = None
        self.index = index  # the changed keys' index (read_path/change_index.py), if built
        self._readers: dict[int, DnReader] = {}
        self._table: LogicalTable | None = None
        self._shards: list[Shard] = []
        self._plan: Plan | None = None

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
        if self.past:
            self._shape = await past_shape(
                self.source, self.files, self.position, table.db, table.name
            )
        self._plan = await plan(stmt, self.db, reader, first, binary, self.sort_rows, self._shape)
        return self._plan.result

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

    async def _rows(self, plan: Plan, stmt: TableSelect) -> AsyncIterator[list[bytes]]:
        if stmt.limit == 0:
            return
        if stmt.aggregate:
            skip, left = (0, None) if stmt.first is None else (stmt.offset, stmt.first)
            row = await aggregate(stmt.items, plan, self._sorted(plan), skip, left)
            if stmt.offset == 0 or stmt.first is not None:
                yield [row]
            return
        chunks = self._at_p(plan) if plan.key_order else self._sorted_rows(plan)
        async with contextlib.aclosing(window(chunks, stmt.offset, stmt.limit)) as rows:
            async for chunk in rows:
                if chunk:
                    yield chunk

    async def _sorted(self, plan: Plan) -> AsyncIterator[list]:
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
        sorter = Sorter(row_order(columns), self.sort_rows, keep(self.stmt))
        async with contextlib.aclosing(self._at_p(plan, split=True)) as chunks:
            async for chunk in chunks:
                sorter.add(chunk)
        rows = sorter.sorted()
        for start in range(0, len(rows), self.page_rows):
            yield rows[start : start + self.page_rows]

    async def _sorted_rows(self, plan: Plan) -> AsyncIterator[list[bytes]]:
        async with contextlib.aclosing(self._sorted(plan)) as chunks:
            async for chunk in chunks:
                yield [text_row(fields[: plan.shown]) for fields in chunk]

    def _at_p(self, plan: Plan, *, split: bool = False) -> AsyncIterator:
        """The table's rows at P matching the WHERE, in key order, a chunk at a time
        (`at_p.rows_at_p`): text rows of the data columns (or their fields, `split`)."""
        table = self._table
        assert table is not None
        changes = ChangedKeys(
            self.files,
            self.position,
            (table.db, table.name),
            plan.key,
            key_of(plan),
            len(plan.columns),
            None if self._shape is None else self._shape.later,
            self.index,
        )
        page_rows = self.page_rows
        if not plan.integer_key:
            page_rows += 1  # one more than allowed: tells a shard that does not fit
        elif plan.key_order and (limit := keep(self.stmt)) is not None:
            page_rows = max(1, min(page_rows, limit))
        shards = self._shards
        buffers = not split and int64_key(plan)

        async def read_shard(i: int, after: Key | None, rows: int) -> list[tuple[Key, bytes]]:
            """(key, the data columns' text row) of the next rows of shard i, in key order
            (as buffers: `key_rows.IntRows`)."""
            reader = await self._reader(shards[i].dn)
            sql = page_sql(plan, self.stmt, shards[i].name, after, rows)
            if buffers:
                return await reader.int_page(sql)  # type: ignore[return-value]
            return await reader.keyed_page(sql, len(plan.key), plan.integer_key)

        by_dn: dict[int, list[int]] = {}
        for i, shard in enumerate(shards):
            by_dn.setdefault(shard.dn, []).append(i)
        return rows_at_p(
            plan,
            self.stmt.where,
            changes,
            list(by_dn.values()),
            read_shard,
            page_rows,
            self.source.tso,
            self.progress,
            split=split,
            buffers=buffers,
        )

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


def int64_key(plan: Plan) -> bool:
    """A primary key of one integer column whose values fit 64 bits (all but BIGINT UNSIGNED):
    its rows are held as buffers (`key_rows`)."""
    if not plan.integer_key or len(plan.key) != 1:
        return False
    column = plan.columns[plan.key[0]]
    return not (column.type == ColumnType.LONGLONG and column.unsigned)
