"""SHOW TABLE STATUS's `Rows` of logical tables: the sum of the shards' own estimates (InnoDB's
`TABLE_ROWS`, as MySQL reports it), read from the DNs while the result is sent. Flink CDC sizes
its incremental snapshot's chunks by it (`queryApproximateRowCnt`); like MySQL's, it is an
estimate, never a count."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from cdc.protocol.resultset import Column, text_row
from cdc.sql_literal import sql_literal
from read_path.source import DnReader, SnapshotSource
from read_path.values import split_fields


class RowEstimates:
    """A `RowStream`: `rows` (SHOW TABLE STATUS's, from the schema) with column `rows_at`
    filled in from the DNs (NULL for a table the catalogue does not place)."""

    def __init__(
        self,
        source: SnapshotSource,
        db: str,
        columns: list[Column],
        rows: list[tuple],
        rows_at: int,
    ) -> None:
        self.source = source
        self.db = db
        self.columns = columns
        self.table_rows = rows
        self.rows_at = rows_at
        self._readers: dict[int, DnReader] = {}

    async def open(self, binary: bool = False) -> Sequence[Column]:
        return self.columns

    async def rows(self) -> AsyncIterator[list[bytes]]:
        try:
            for row in self.table_rows:
                out = list(row)
                out[self.rows_at] = await self._estimate(str(row[0]))
                yield [text_row(out)]
        finally:
            self.close()

    async def _estimate(self, name: str) -> int | None:
        table = await self.source.table(self.db, name)
        if table is None:
            return None
        total = 0
        for shard in self.source.shards(table):
            schema, physical = (p.strip("`").replace("``", "`") for p in shard.name.split("`.`"))
            reader = self._readers.get(shard.dn)
            if reader is None:
                reader = self._readers[shard.dn] = await self.source.reader(shard.dn)
            _, found = await reader.query(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
                f"{sql_literal(schema)} AND TABLE_NAME = {sql_literal(physical)}"
            )
            for packet in found:
                value = split_fields(packet, 1)[0][0]
                total += int(value) if value else 0
        return total

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
