"""Rows of logical tables: a SELECT over one table, answered as of the global binlog's end when
it starts, or as of a past point (`AS OF`, a transaction's, the session's `cdc_read_as_of`)
(docs/snapshot-reads.md) after its privilege check; the rows are read and streamed by the read
path (`read_path/`), through the `TableReads` the server hands in."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from dumper.server.handlers import OkResult, Pending, Result, SqlError, StreamedRows
from dumper.server.sql import statements as st
from dumper.server.sql.answers import Answers
from dumper.server.sql.points import checked, in_transaction_error
from dumper.server.sql.read_as_of import ReadAtPoint
from dumper.server.users import require_read_rows
from history import PointSpec
from read_path import ColumnDef, unsupported


class TableAnswers(Answers):
    def select(self, stmt: st.TableSelect) -> Result:
        state = self.state
        spec = stmt.as_of
        if spec is not None and state.in_transaction:
            raise in_transaction_error()
        if spec is None and not state.in_transaction:
            spec = self.session_point()
            if spec is None:
                return StreamedRows(self._held(self._read(stmt, self.binlog_end())))
        db = self._checked_db(stmt)  # refused before anything is resolved or read
        if spec is None:  # a transaction's pinned position: a DDL since is refused, named
            pinned = self.read_position()
            point, position = f"'{pinned[0]}':{pinned[1]}", _known(pinned)
        else:
            point, position = spec.text, lambda: self.ctx.points.resolve(spec, self.binlog_end())
        return StreamedRows(
            ReadAtPoint(
                point,
                position,
                lambda at: self._held(self._read(stmt, at, db, past=True)),
                self.ctx.served.files.readable(),
                (db, stmt.table),
            )
        )

    def _held(self, read):
        """`read`'s position held from purge while the statement runs, until the read closes
        (store/retention.py; a result never streamed holds until the session's next SELECT or
        its end); a transaction's pinned position is held until the transaction ends."""
        state = self.state
        state.reading = position = read.position

        def done() -> None:
            if state.reading is position:
                state.reading = None

        read.on_close = done
        return read

    async def describe(self, stmt: st.TableSelect) -> list[ColumnDef]:
        """The result columns of `stmt` (a prepared statement's), planned as a read at the
        binlog's end without reading a row; a transaction is not pinned by it. A statement's
        own `AS OF` point: the table's columns there (a DDL since may have added one), or,
        when that point cannot be read now (not yet written, refused), the end's: EXECUTE
        says which, as it does for any statement."""
        if isinstance(stmt.as_of, PointSpec):
            with contextlib.suppress(SqlError):
                position = await self.ctx.points.resolve(stmt.as_of, self.binlog_end())
                return await self._described(self._read(stmt, position, past=True))
        return await self._described(self._read(stmt, self.binlog_end()))

    @staticmethod
    async def _described(read) -> list[ColumnDef]:
        try:
            return await read.open()
        finally:
            read.close()

    def _checked_db(self, stmt: st.TableSelect) -> str:
        db = stmt.db or self.state.db
        if not db:
            raise SqlError("No database selected", 1046, "3D000")
        require_read_rows(self.state.user, self.state.host, db, stmt.table)
        if self.ctx.reads is None:
            raise unsupported("reading rows on a dumper started without the cluster's GMS")
        return db

    def _read(
        self,
        stmt: st.TableSelect,
        position: tuple[str, int],
        db: str | None = None,
        past: bool = False,
    ):
        db = db or self._checked_db(stmt)
        assert self.ctx.reads is not None
        return self.ctx.reads.select(stmt, db, position, past)

    def session_point(self) -> PointSpec | None:
        """The session's `cdc_read_as_of` (else the global one): every read outside a
        transaction, and every transaction it starts, as of that point; "" is the end."""
        name = "cdc_read_as_of"
        text = self.state.session_vars.get(name, self.ctx.variables.get(name))
        return checked(str(text)) if text else None

    def transaction(self, stmt: st.Transaction) -> Result:
        """BEGIN pins at the first read (REPEATABLE READ); WITH CONSISTENT SNAPSHOT at once;
        COMMIT/ROLLBACK unpin. Nothing is held on the DNs meanwhile: a pinned position is a
        number, and each read reconciles from it. READ ONLY AS OF a point (or a session's
        `cdc_read_as_of`) pins there, once resolved off the loop."""
        state = self.state
        spec = stmt.as_of
        if spec is None and stmt.action != "end":
            spec = self.session_point()
        state.in_transaction = stmt.action != "end" and spec is None
        state.pinned = self.binlog_end() if stmt.action == "snapshot" and spec is None else None
        if spec is None:
            return OkResult()

        async def pin() -> Result:
            position = await self.ctx.points.resolve(spec, self.binlog_end())
            state.in_transaction, state.pinned = True, position
            return OkResult()

        return Pending(pin())

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


def _known(position: tuple[str, int]) -> Callable[[], Awaitable[tuple[str, int]]]:
    async def known() -> tuple[str, int]:
        return position

    return known
