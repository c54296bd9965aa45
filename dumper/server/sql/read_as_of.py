"""A SELECT as of a past point (docs/snapshot-reads.md, "As of a past point"): the point is
resolved first (off the loop: `points.PointResolver`), then the read is the snapshot read of
that position, in the table's shape there (read_path/past_shape.py); a DDL after the point that
destroyed what the read needs (a dropped column, a truncation, ...) is refused naming it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from dumper.server.handlers import ColumnPacket, RowStream, SqlError
from read_path import ServedFiles, TableChangedByDdl, TableShapeDiffers, first_ddl

ER_NO_SUCH_TABLE = 1146
ER_TABLE_DEFINITION_CHANGED = 1412  # MySQL's ER_TABLE_DEF_CHANGED: "Table definition has changed"


def refused(db: str, table: str, point: str, where: str, text: str, why: str = "") -> SqlError:
    return SqlError(
        f"Table definition has changed, please retry transaction: {db}.{table} as of {point} "
        f"cannot be read: the DDL at {where} after that point ({text[:120]}) "
        f"{why or 'changed it'}; read as of a point after that DDL, or at the end",
        ER_TABLE_DEFINITION_CHANGED,
        "HY000",
    )


class ReadAtPoint:
    """A `RowStream`: `position()` resolves the point when the result is opened, `start`
    makes the snapshot read of that position."""

    def __init__(
        self,
        point: str,
        position: Callable[[], Awaitable[tuple[str, int]]],
        start: Callable[[tuple[str, int]], RowStream],
        files: ServedFiles,
        table: tuple[str, str],
    ) -> None:
        self.point = point  # as written, for errors
        self.table = table  # (db, name)
        self._position = position
        self._start = start
        self._files = files  # where the DDL that changed the table is looked for
        self._at: tuple[str, int] | None = None
        self._read: RowStream | None = None

    async def open(self, binary: bool = False) -> Sequence[ColumnPacket]:
        self._at = await self._position()
        self._read = self._start(self._at)
        try:
            return await self._read.open(binary)
        except (TableChangedByDdl, TableShapeDiffers) as exc:
            raise await self._refused(exc) from None
        except SqlError as exc:
            if exc.code != ER_NO_SUCH_TABLE:
                raise
            # Gone now: if a DDL after the point dropped (or renamed) it, say which.
            found = await first_ddl(self._files, self._at, *self.table)
            if found is None:
                raise
            raise refused(*self.table, self.point, *found) from None

    async def rows(self) -> AsyncIterator[list[bytes]]:
        assert self._read is not None
        try:
            async with contextlib.aclosing(self._read.rows()) as batches:
                async for rows in batches:
                    yield rows
        except (TableChangedByDdl, TableShapeDiffers) as exc:
            raise await self._refused(exc) from None

    async def _refused(self, exc: TableChangedByDdl | TableShapeDiffers) -> SqlError:
        """The DDL met, or (rows of the old shape met first) the first DDL on the table after
        the point, named with its place."""
        if isinstance(exc, TableChangedByDdl):
            return refused(exc.db, exc.table, self.point, exc.where, exc.text, exc.why)
        assert self._at is not None
        found = await first_ddl(self._files, self._at, exc.db, exc.table)
        return exc if found is None else refused(exc.db, exc.table, self.point, *found)

    def close(self) -> None:
        if self._read is not None:
            self._read.close()
