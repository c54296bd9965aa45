"""Rows of logical tables: a SELECT over one table, answered as of the global binlog's end when
it starts (docs/snapshot-reads.md) after its privilege check; the rows are read and streamed by
the read path (`read_path/`), through the `TableReads` the server hands in."""

from __future__ import annotations

from collections.abc import Callable

from dumper.server.handlers import OkResult, Result, SqlError, StreamedRows
from dumper.server.sql import statements as st
from dumper.server.sql.answers import Answers
from dumper.server.users import require_read_rows
from read_path import ColumnDef, unsupported


class TableAnswers(Answers):
    def select(self, stmt: st.TableSelect) -> Result:
        read = self._read(stmt, self.read_position)
        # Held from purge while the statement runs, until the read closes (store/retention.py;
        # a result never streamed holds until the session's next SELECT or its end); a
        # transaction's pinned position is held until the transaction ends.
        state = self.state
        state.reading = position = read.position

        def done() -> None:
            if state.reading is position:
                state.reading = None

        read.on_close = done
        return StreamedRows(read)

    async def describe(self, stmt: st.TableSelect) -> list[ColumnDef]:
        """The result columns of `stmt` (a prepared statement's), planned as a read at the
        binlog's end without reading a row; a transaction is not pinned by it."""
        read = self._read(stmt, self.binlog_end)
        try:
            return await read.open()
        finally:
            read.close()

    def _read(self, stmt: st.TableSelect, position: Callable[[], tuple[str, int]]):
        db = stmt.db or self.state.db
        if not db:
            raise SqlError("No database selected", 1046, "3D000")
        require_read_rows(self.state.user, self.state.host, db, stmt.table)
        if self.ctx.reads is None:
            raise unsupported("reading rows on a dumper started without the cluster's GMS")
        return self.ctx.reads.select(stmt, db, position())

    def transaction(self, stmt: st.Transaction) -> Result:
        """BEGIN pins at the first read (REPEATABLE READ); WITH CONSISTENT SNAPSHOT at once;
        COMMIT/ROLLBACK unpin. Nothing is held on the DNs meanwhile: a pinned position is a
        number, and each read reconciles from it."""
        state = self.state
        state.in_transaction = stmt.action != "end"
        state.pinned = self.binlog_end() if stmt.action == "snapshot" else None
        return OkResult()

    def read_position(self) -> tuple[str, int]:
        """Where this session reads now: its transaction's pinned position (pinned by this
        read if not yet), else the binlog's end."""
        state = self.state
        if not state.in_transaction:
            return self.binlog_end()
        if state.pinned is None:
            state.pinned = self.binlog_end()
        return state.pinned

    def binlog_end(self) -> tuple[str, int]:
        """P: the end of the global binlog this server serves now (whole transactions: the
        leader's published end when there is one), as SHOW MASTER STATUS says it."""
        files = self.ctx.served.files
        names = files.names()
        if not names:
            raise SqlError(
                "the global binlog has no file yet: rows are read as of a binlog position",
                1105,
                "HY000",
            )
        last = names[-1]
        end = files.complete_end(last)
        visible = self.ctx.served.notifier.visible_end(last)
        return last, end if visible is None else min(end, visible)
