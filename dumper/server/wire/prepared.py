"""Server-side prepared statements (COM_STMT_PREPARE / EXECUTE / FETCH / CLOSE / RESET /
SEND_LONG_DATA) over the same statements as COM_QUERY: the text is kept with its `?`
placeholders, and each EXECUTE binds the parameters as SQL literals and runs the statement
through the session's query handler (clients such as zongji and Connector/J with
`useServerPrepStmts` send schema queries this way). Results go back in the binary protocol;
rows of logical tables are streamed as they are read (`binary_rows.py` converts them), or held
in a cursor (CURSOR_TYPE_READ_ONLY) that COM_STMT_FETCH reads on, as MariaDB's sql_cursor.cc
answers: the metadata ends with SERVER_STATUS_CURSOR_EXISTS, each fetch sends up to its count
of rows, and the fetch that finds the end says SERVER_STATUS_LAST_ROW_SENT and closes it. A
cursor is the suspended read itself, never a copy of the table."""

from __future__ import annotations

import asyncio
import re
import struct
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from cdc.protocol.constants import ColumnType, Status
from cdc.protocol.packets import ProtocolError, eof_packet, lenenc_int, ok_packet, read_lenenc_str
from cdc.protocol.resultset import BINARY_FIXED, Column
from cdc.sql_literal import LiteralError, sql_literal
from dumper.server.handlers import (
    ColumnPacket,
    OkResult,
    QueryHandler,
    Result,
    SqlError,
    settled,
)
from dumper.server.sessions import SessionState
from dumper.server.wire.binary_rows import OpenRows, open_binary
from dumper.server.wire.conn import ROWS_PER_TURN, Conn

# Per session, as MySQL's max_prepared_stmt_count bounds them per server: memory stays bounded.
MAX_STATEMENTS = 256
ER_MAX_PREPARED_STMT_COUNT_REACHED = 1461
ER_UNKNOWN_STMT_HANDLER = 1243
ER_WRONG_ARGUMENTS = 1210
ER_STMT_HAS_NO_OPEN_CURSOR = 1421
ER_UNKNOWN = 1105
CURSOR_TYPE_READ_ONLY = 0x01
# Open cursors per session: each holds a suspended read (its DN connections and up to a few
# pages per shard), so their number bounds a session's memory, as MAX_STATEMENTS does theirs.
MAX_CURSORS = 16

# A quoted run (kept whole) or a placeholder; the statement's comments are already gone.
_QUOTED_OR_PLACEHOLDER = re.compile(
    r"""'(?:[^'\\]++|\\.|'')*+'?|"(?:[^"\\]++|\\.|"")*+"?|`(?:[^`]++|``)*+`?|(\?)""", re.S
)


def placeholders(text: str) -> list[int]:
    """Offsets of the `?` placeholders outside quotes."""
    return [m.start(1) for m in _QUOTED_OR_PLACEHOLDER.finditer(text) if m.group(1)]


def literal(value: object) -> str:
    """A parameter as our own parser reads it: the one renderer, with bytes decoded to text
    first (sql/lexer.py reads no X'..'); a float that is not finite has no literal."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    try:
        return sql_literal(value)
    except LiteralError as exc:
        raise SqlError(
            f"Incorrect arguments to mysqld_stmt_execute ({exc})", ER_WRONG_ARGUMENTS
        ) from None


@dataclass(slots=True)
class Prepared:
    text: str
    holes: list[int]
    types: list[tuple[int, bool]] = field(default_factory=list)  # (type, unsigned) per param
    long_data: dict[int, bytearray] = field(default_factory=dict)
    checked: str | None = None  # the text with placeholder values that parsed at PREPARE
    columns: Sequence[ColumnPacket] = ()  # the result's, when known at PREPARE
    cursor: OpenRows | None = None

    @property
    def params(self) -> int:
        return len(self.holes)

    def bind(self, values: list[object]) -> str:
        out, last = [], 0
        for hole, value in zip(self.holes, values, strict=True):
            out += [self.text[last:hole], literal(value)]
            last = hole + 1
        return "".join(out) + self.text[last:]


def prepare(text: str, queries: QueryHandler) -> Prepared:
    """Check the statement (as MySQL does at PREPARE) and keep it."""
    statements = queries.split(text)
    if len(statements) != 1:
        raise SqlError("Query was empty" if not statements else "One statement at a time")
    stmt = Prepared(statements[0], placeholders(statements[0]))
    # A syntax error shows now, as in MySQL, not at EXECUTE: parsed with the parameters as a
    # string, a number and NULL in turn (the grammar wants a string in `WHERE c = ?`, a number
    # in `LIMIT ?`); a statement none of them suits is left for EXECUTE to judge.
    first: SqlError | None = None
    for value in ("", 0, None):
        try:
            text = stmt.bind([value] * stmt.params)
            queries.check(text)
            stmt.checked = text
            return stmt
        except SqlError as exc:
            first = first or exc
            if not stmt.params:
                break
    if not stmt.params and first is not None:
        raise first
    return stmt


def _temporal(data: bytes, pos: int) -> tuple[int, bytes]:
    """The length byte and the bytes of a binary DATE/DATETIME/TIME value, whole or an error."""
    n = data[pos]
    parts = data[pos + 1 : pos + 1 + n]
    if len(parts) != n:
        raise struct.error(f"a temporal value of {n} bytes with {len(parts)} left in the packet")
    return n, parts


def _value(data: bytes, pos: int, type_: int, unsigned: bool) -> tuple[object, int]:
    fixed = BINARY_FIXED.get(type_)
    if fixed is not None:
        fmt = "<" + (fixed.upper() if unsigned and fixed not in "fd" else fixed)
        return struct.unpack_from(fmt, data, pos)[0], pos + struct.calcsize(fmt)
    if type_ in (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP):
        n, parts = _temporal(data, pos)
        y, mo, d = struct.unpack_from("<HBB", parts) if n >= 4 else (0, 0, 0)
        h, mi, s = parts[4:7] if n >= 7 else (0, 0, 0)
        us = struct.unpack_from("<I", parts, 7)[0] if n >= 11 else 0
        text = f"{y:04d}-{mo:02d}-{d:02d}"
        if type_ != ColumnType.DATE:
            text += f" {h:02d}:{mi:02d}:{s:02d}" + (f".{us:06d}" if us else "")
        return text, pos + 1 + n
    if type_ == ColumnType.TIME:
        n, parts = _temporal(data, pos)
        if n >= 8:
            neg, days, h, mi, s = struct.unpack_from("<BIBBB", parts)
            us = struct.unpack_from("<I", parts, 8)[0] if n >= 12 else 0
            text = f"{'-' if neg else ''}{days * 24 + h:02d}:{mi:02d}:{s:02d}"
            return text + (f".{us:06d}" if us else ""), pos + 1 + n
        return "00:00:00", pos + 1 + n
    if type_ == ColumnType.NULL:
        return None, pos
    return read_lenenc_str(data, pos)  # strings, DECIMAL, BLOB, JSON, …


def execute_text(stmt: Prepared, body: bytes) -> str:
    """The statement text with the parameters of a COM_STMT_EXECUTE body (after the command
    byte: stmt id, flags, iteration count, NULL bitmap, new-params-bound flag, types, values)."""
    n = stmt.params
    if n == 0:
        return stmt.text
    try:
        pos = 9
        nulls = body[pos : pos + (n + 7) // 8]
        pos += (n + 7) // 8
        if body[pos]:
            pos += 1
            stmt.types = [(body[pos + 2 * i], bool(body[pos + 2 * i + 1] & 0x80)) for i in range(n)]
            pos += 2 * n
        else:
            pos += 1
        if len(stmt.types) != n:
            raise SqlError(
                "Incorrect arguments to mysqld_stmt_execute: no parameter types bound",
                ER_WRONG_ARGUMENTS,
            )
        values: list[object] = []
        for i, (type_, unsigned) in enumerate(stmt.types):
            if nulls[i // 8] >> (i % 8) & 1:
                values.append(None)
            elif i in stmt.long_data:
                values.append(bytes(stmt.long_data[i]))
            else:
                value, pos = _value(body, pos, type_, unsigned)
                values.append(value)
    except (IndexError, struct.error, ProtocolError) as exc:
        raise SqlError(
            f"Incorrect arguments to mysqld_stmt_execute ({exc})", ER_WRONG_ARGUMENTS
        ) from None
    finally:
        stmt.long_data.clear()
    return stmt.bind(values)


def _u32(body: bytes) -> int:
    return int.from_bytes(body[:4], "little")


class PreparedStatements:
    """One session's prepared statements and its COM_STMT_* commands; replies go to `conn`."""

    def __init__(self, conn: Conn, queries: QueryHandler, state: SessionState) -> None:
        self.conn = conn
        self.queries = queries
        self.state = state
        self._prepared: dict[int, Prepared] = {}
        self._next_id = 1

    def _end(self, status: int) -> bytes:
        """The packet that ends metadata or rows: EOF, or OK with 0xFE for DEPRECATE_EOF
        clients (net_send_eof)."""
        if self.conn.deprecate_eof:
            return ok_packet(status=status, header=0xFE)
        return eof_packet(status=status)

    def _columns(self, columns: Sequence[ColumnPacket]) -> None:
        for column in columns:
            self.conn.send(column.encode())

    async def prepare(self, body: bytes) -> None:
        text = body.decode("utf-8", "replace")
        self.state.info = text[:200]
        try:
            if len(self._prepared) >= MAX_STATEMENTS:
                raise SqlError(
                    "Can't create more than max_prepared_stmt_count statements "
                    f"(current value: {MAX_STATEMENTS})",
                    ER_MAX_PREPARED_STMT_COUNT_REACHED,
                    "42000",
                )
            stmt = prepare(text, self.queries)
            # The result columns, as MySQL announces them at PREPARE (Connector/J opens a
            # cursor only for a statement that announced some): known before reading for rows
            # of logical tables; other statements give theirs with each EXECUTE.
            if stmt.checked is not None:
                stmt.columns = await self.queries.describe(stmt.checked)
        except SqlError as exc:
            self.conn.send_error(exc.code, exc.message, exc.sql_state)
            return
        finally:
            self.state.info = None
        stmt_id = self._next_id
        self._next_id += 1
        self._prepared[stmt_id] = stmt
        self.conn.send(struct.pack("<BIHHBH", 0, stmt_id, len(stmt.columns), stmt.params, 0, 0))
        if stmt.params:
            for _ in range(stmt.params):
                self.conn.send(Column("?").encode())
            if not self.conn.deprecate_eof:
                self.conn.send(eof_packet())
        if stmt.columns:
            self._columns(stmt.columns)
            if not self.conn.deprecate_eof:
                self.conn.send(eof_packet())

    async def execute(self, body: bytes) -> None:
        stmt = self._prepared.get(_u32(body)) if len(body) >= 9 else None
        if stmt is None:
            self.conn.send_error(
                ER_UNKNOWN_STMT_HANDLER,
                "Unknown prepared statement handler given to mysqld_stmt_execute",
            )
            return
        cursor = bool(body[4] & CURSOR_TYPE_READ_ONLY)
        await self._close_cursor(stmt)  # a new EXECUTE closes the statement's cursor
        try:
            text = execute_text(stmt, body)
            self.state.info = text[:200]
            if cursor and sum(s.cursor is not None for s in self._prepared.values()) >= MAX_CURSORS:
                raise SqlError(
                    f"this session has {MAX_CURSORS} open cursors: fetch one to its end, or "
                    "close or reset its statement",
                    ER_UNKNOWN,
                    "HY000",
                )
            result: Result = await settled(self.queries.execute(text))
            if isinstance(result, OkResult):
                self.conn.send(ok_packet(affected=result.affected, status=Status.AUTOCOMMIT))
                return
            rows = await open_binary(result)
            self.conn.send(lenenc_int(len(rows.columns)))
            self._columns(rows.columns)
            if cursor:
                stmt.cursor = rows
                self.conn.send(self._end(Status.AUTOCOMMIT | Status.CURSOR_EXISTS))
                return
            if not self.conn.deprecate_eof:
                self.conn.send(eof_packet())
            try:
                await self._send_rows(rows.rows, None)
            finally:
                await rows.close()
            self.conn.send(self._end(Status.AUTOCOMMIT))
        except SqlError as exc:
            self.conn.send_error(exc.code, exc.message, exc.sql_state)
        finally:
            self.state.info = None

    async def fetch(self, body: bytes) -> None:
        """COM_STMT_FETCH: up to its count of the cursor's next rows (Materialized_cursor::fetch
        reads that many and no further: a cursor read to its last row ends at the next fetch)."""
        stmt = self._prepared.get(_u32(body)) if len(body) >= 8 else None
        if stmt is None:
            self.conn.send_error(
                ER_UNKNOWN_STMT_HANDLER,
                "Unknown prepared statement handler given to mysqld_stmt_fetch",
            )
            return
        rows = stmt.cursor
        if rows is None:
            self.conn.send_error(
                ER_STMT_HAS_NO_OPEN_CURSOR, f"The statement ({_u32(body)}) has no open cursor."
            )
            return
        try:
            ended = await self._send_rows(rows.rows, int.from_bytes(body[4:8], "little"))
        except SqlError as exc:
            await self._close_cursor(stmt)
            self.conn.send_error(exc.code, exc.message, exc.sql_state)
            return
        if ended:
            await self._close_cursor(stmt)
            self.conn.send(self._end(Status.AUTOCOMMIT | Status.LAST_ROW_SENT))
        else:
            self.conn.send(self._end(Status.AUTOCOMMIT | Status.CURSOR_EXISTS))

    async def _send_rows(self, rows: AsyncIterator[bytes | None], limit: int | None) -> bool:
        """Rows as they are read, at most `limit`, flushed with back-pressure (a client that
        reads slowly holds the read back); True when the rows ran out."""
        conn = self.conn
        if limit == 0:
            return False
        sent, budget = 0, ROWS_PER_TURN
        async for row in rows:
            if row is not None:
                conn.send(row)
                sent += 1
            budget -= 1
            if budget <= 0:
                await conn.flush()  # waits while the client does not read
                await asyncio.sleep(0)  # rows of a list: let the loop's other sessions run
                budget = ROWS_PER_TURN
            if limit is not None and sent >= limit:
                return False
        return True

    async def _close_cursor(self, stmt: Prepared) -> None:
        rows, stmt.cursor = stmt.cursor, None
        if rows is not None:
            await rows.close()

    def send_long_data(self, body: bytes) -> None:
        """A parameter's bytes in parts; no reply, as in MySQL."""
        if len(body) >= 6 and (stmt := self._prepared.get(_u32(body))) is not None:
            param = int.from_bytes(body[4:6], "little")
            if param < stmt.params:
                stmt.long_data.setdefault(param, bytearray()).extend(body[6:])

    async def close(self, body: bytes) -> None:
        """No reply."""
        if len(body) >= 4 and (stmt := self._prepared.pop(_u32(body), None)) is not None:
            await self._close_cursor(stmt)

    async def reset(self, body: bytes) -> None:
        """Long data dropped and the cursor closed (mysqld_stmt_reset)."""
        if len(body) >= 4 and (stmt := self._prepared.get(_u32(body))) is not None:
            stmt.long_data.clear()
            await self._close_cursor(stmt)
            self.conn.send(ok_packet(status=Status.AUTOCOMMIT))
        else:
            self.conn.send_error(
                ER_UNKNOWN_STMT_HANDLER,
                "Unknown prepared statement handler given to mysqld_stmt_reset",
            )

    async def close_all(self) -> None:
        """The session ends: every cursor's read is released."""
        for stmt in self._prepared.values():
            await self._close_cursor(stmt)
        self._prepared.clear()
