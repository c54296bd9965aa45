"""The read path as the server's SQL answers see it: one object the server builds (the cluster,
the served files, the writer's progress and the read's bounds) and hands to its answers, which
ask it for a statement's read and know nothing else of this package."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdc.protocol.resultset import Column
from read_path.estimates import RowEstimates
from read_path.read import PAGE_ROWS, SORT_ROWS, SnapshotRead
from read_path.request import TableSelect
from read_path.served import ChangeIndex, Progress, ServedFiles
from read_path.source import SnapshotSource


@dataclass(slots=True)
class TableReads:
    source: SnapshotSource  # the cluster's GMS and DNs
    files: ServedFiles  # the global binlog, scanned from a read's position
    progress: Progress  # the writer's, which a read's high watermark waits on
    page_rows: int = PAGE_ROWS
    sort_rows: int = SORT_ROWS
    index: ChangeIndex | None = None  # the changed keys' index, where the server builds one

    def select(
        self, stmt: TableSelect, db: str, position: tuple[str, int], past: bool = False
    ) -> SnapshotRead:
        """The rows of `stmt` over `db` as of `position`: `open()` then `rows()`. `past`: a
        point in the past, where the table may have had another shape (past_shape.py)."""
        return SnapshotRead(
            self.source,
            self.files,
            self.progress,
            stmt,
            db,
            position,
            page_rows=self.page_rows,
            sort_rows=self.sort_rows,
            past=past,
            index=self.index,
        )

    def row_estimates(
        self, db: str, columns: list[Column], rows: Sequence[tuple], rows_at: int
    ) -> RowEstimates:
        """SHOW TABLE STATUS's `rows` with column `rows_at` filled in from the DNs."""
        return RowEstimates(self.source, db, columns, list(rows), rows_at)
