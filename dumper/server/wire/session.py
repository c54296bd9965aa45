"""One client connection (go-mysql's `Conn`): login (`handshake.py`), then the command switch.
It knows nothing of what it answers: statements go to the session's `QueryHandler` (`sql/`),
registrations and dumps to its `ReplicationHandler` (`dump/`), prepared statements to
`prepared.py`; this module encodes their results and errors as packets."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from cdc.protocol.constants import Capability as Cap
from cdc.protocol.constants import Command, Status
from cdc.protocol.framed_rows import FramedRows
from cdc.protocol.packets import eof_packet, err_packet, lenenc_int, ok_packet
from cdc.protocol.resultset import result_set_packets, text_row
from dumper.server.handlers import (
    HandlerFactory,
    OkResult,
    RowsResult,
    SqlError,
    StreamedRows,
    settled,
)
from dumper.server.sessions import SessionState
from dumper.server.wire.conn import (
    BYTES_PER_WRITE,
    ROWS_PER_TURN,
    ROWS_PER_WRITE,
    Closed,
    Conn,
    Fatal,
    Idle,
)
from dumper.server.wire.context import WireContext
from dumper.server.wire.handshake import handshake
from dumper.server.wire.prepared import PreparedStatements
from dumper.server.wire.row_packets import frame_rows, stamp

log = logging.getLogger(__name__)
COM_STATISTICS = 0x09
COM_RESET_CONNECTION = 0x1F


class Session:
    """Lives as long as its connection; `run` never raises."""

    def __init__(
        self,
        ctx: WireContext,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handlers: HandlerFactory,
    ) -> None:
        self.ctx = ctx
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.state = SessionState(ctx.sessions.next_id(), str(peer[0]), int(peer[1]))
        self.conn = Conn(
            reader,
            writer,
            ctx.config.max_allowed_packet,
            lambda: self._timeout("net_read_timeout"),
            ctx.config.client_timeout_s,
        )
        answers = handlers(self.state)
        self.queries = answers.queries
        self.replication = answers.replication
        self.prepared = PreparedStatements(self.conn, self.queries, self.state)
        self._task: asyncio.Task | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> None:
        self._task = asyncio.current_task()
        cid = self.state.conn_id
        cfg = self.ctx.config
        conn = self.conn
        try:
            # max_connections + 1 at accept: the spare slot is an admin's, checked after login
            waiting = sum(1 for s in self.ctx.sessions.live.values() if s.state.user is None)
            if (
                len(self.ctx.sessions.live) > cfg.max_connections
                or waiting >= cfg.max_unauthenticated_connections
            ):
                conn.new_command()
                conn.send(err_packet(1040, "Too many connections", "08004"))
                await conn.flush()
                return
            self.ctx.sessions.live[cid] = self
            if await asyncio.wait_for(handshake(conn, self.ctx, self.state), cfg.connect_timeout):
                await self._command_loop()
        except Fatal as exc:
            log.info("connection %d from %s closed: %s", cid, self.state.host, exc.message)
            conn.discard()
            conn.send(err_packet(exc.code, exc.message, "08S01"))
            with contextlib.suppress(ConnectionError, OSError):
                await asyncio.wait_for(conn.flush(), 5)
        except (Closed, ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # KILL or server shutdown
        except Exception:
            log.exception("connection %d from %s: internal error", cid, self.state.host)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.prepared.close_all())  # cursors' reads released
            self.ctx.sessions.live.pop(cid, None)
            with contextlib.suppress(Exception):
                self.replication.close()  # the dump's own records of this connection
            conn.writer.close()

    def kill(self) -> None:
        self.conn.writer.close()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    def _timeout(self, name: str) -> float:
        """A session timeout variable (SET wait_timeout = n, ...; else the reported default) in
        MySQL's range of 1 s to a year."""
        value = self.state.session_vars.get(name, self.ctx.variables.get(name))
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            seconds = float(self.ctx.variables.get(name) or 30)  # type: ignore[arg-type]
        return min(max(seconds, 1.0), 31536000.0)

    # -- the command switch --------------------------------------------------------------------
    async def _command_loop(self) -> None:
        conn, state = self.conn, self.state
        while True:
            state.command = "Sleep"
            conn.new_command()
            timeout = "wait_timeout"
            if state.in_transaction:  # a pinned snapshot holds binlog files from purge
                timeout = min(timeout, "idle_readonly_transaction_timeout", key=self._timeout)
            try:
                payload = await conn.read_packet(idle=self._timeout(timeout))
            except Idle:
                log.info(
                    "connection %d from %s: idle for %s (%.0f s), closed",
                    state.conn_id,
                    state.host,
                    timeout,
                    self._timeout(timeout),
                )
                return
            if not payload:
                conn.send_error(1047, "Unknown command (empty packet)", "08S01")
                await conn.flush()
                continue
            cmd, body = payload[0], payload[1:]
            state.since = time.time()
            if cmd == Command.QUIT:
                return
            if cmd == Command.QUERY:
                state.command = "Query"
                await self._query(body)
            elif cmd == Command.PING:
                self._send_ok()
            elif cmd == Command.INIT_DB:
                state.db = body.decode("utf-8", "replace")
                self._send_ok()
            elif cmd == COM_RESET_CONNECTION:
                state.user_vars.clear()
                state.session_vars.clear()
                self._send_ok()
            elif cmd == Command.FIELD_LIST:
                conn.send(ok_packet(header=0xFE) if conn.deprecate_eof else eof_packet())
            elif cmd == COM_STATISTICS:
                conn.send(f"Uptime: {int(time.time() - self.ctx.sessions.started)}".encode())
            elif cmd == Command.STMT_PREPARE:
                state.command = "Prepare"
                await self.prepared.prepare(body)
            elif cmd == Command.STMT_EXECUTE:
                state.command = "Execute"
                await self.prepared.execute(body)
            elif cmd == Command.STMT_FETCH:
                state.command = "Fetch"
                await self.prepared.fetch(body)
            elif cmd == Command.STMT_SEND_LONG_DATA:  # no reply, as in MySQL
                self.prepared.send_long_data(body)
                continue
            elif cmd == Command.STMT_CLOSE:  # no reply
                await self.prepared.close(body)
                continue
            elif cmd == Command.STMT_RESET:
                await self.prepared.reset(body)
            elif cmd == Command.REGISTER_SLAVE:
                self._register_replica(body)
            elif cmd == Command.BINLOG_DUMP or cmd == Command.BINLOG_DUMP_GTID:
                await self._binlog_dump(body, by_gtid=cmd == Command.BINLOG_DUMP_GTID)
                return  # like MySQL: a dump ends its connection
            else:
                conn.send_error(1047, f"Unknown command 0x{cmd:02x}", "08S01")
            await conn.flush()

    def _send_ok(self) -> None:
        self.conn.send(ok_packet(status=Status.AUTOCOMMIT))

    def _send_sql_error(self, exc: SqlError) -> None:
        self.conn.send_error(exc.code, exc.message, exc.sql_state)

    # -- COM_QUERY -----------------------------------------------------------------------------
    async def _query(self, body: bytes) -> None:
        conn = self.conn
        text = body.decode("utf-8", "replace")
        self.state.info = text[:200]
        try:
            statements = self.queries.split(text)
            if not statements:
                raise SqlError("Query was empty", 1065)
            if len(statements) > 1 and not conn.client_caps & Cap.MULTI_STATEMENTS:
                raise SqlError(
                    "You have an error in your SQL syntax: several statements in one query need "
                    "CLIENT_MULTI_STATEMENTS"
                )
        except SqlError as exc:
            self._send_sql_error(exc)
            return
        for i, stmt in enumerate(statements):
            status = Status.AUTOCOMMIT | (
                Status.MORE_RESULTS_EXISTS if i + 1 < len(statements) else 0
            )
            try:
                result = await settled(self.queries.execute(stmt))
            except SqlError as exc:
                self._send_sql_error(exc)
                break  # MySQL stops a multi-statement at the first error
            if isinstance(result, OkResult):
                conn.send(ok_packet(affected=result.affected, status=status))
            elif isinstance(result, StreamedRows):
                if not await self._stream_table(result, status):
                    break
            elif isinstance(result.rows, list):
                for payload in result_set_packets(
                    result.columns, result.rows, deprecate_eof=conn.deprecate_eof, status=status
                ):
                    conn.send(payload)
            elif not await self._stream_rows(result, status):
                break
            if conn.pending > 64:
                await conn.flush()
            if i % 64 == 63:
                await asyncio.sleep(0)  # thousands of statements in one query: let others run
        self.state.info = None

    async def _stream_rows(self, result: RowsResult, status: int) -> bool:
        """A result set whose rows are read while sending (SHOW BINLOG EVENTS of a file of any
        size): at most ROWS_PER_TURN rows per loop turn, flushed with back-pressure, so neither
        memory nor the loop's other sessions depend on its size. An error part way through ends
        it with ERR, as MySQL does; False then (a multi-statement stops)."""
        conn = self.conn
        head = result_set_packets(
            result.columns, [], deprecate_eof=conn.deprecate_eof, status=status
        )
        for payload in head[:-1]:
            conn.send(payload)
        budget = ROWS_PER_TURN
        try:
            for row in result.rows:
                if row is not None:
                    conn.send(text_row(row))
                budget -= 1
                if budget <= 0:
                    await conn.flush()  # waits while the client does not read
                    await asyncio.sleep(0)
                    budget = ROWS_PER_TURN
        except SqlError as exc:
            self._send_sql_error(exc)
            return False
        conn.send(head[-1])
        return True

    async def _stream_table(self, result: StreamedRows, status: int) -> bool:
        """Rows read from elsewhere (snapshot reads: DN pages between watermarks) while they
        are sent: the columns first, then each row as it comes, flushed with back-pressure so a
        client that reads slowly holds the read (and its memory) back. An error before the
        columns is a plain ERR; after, it ends the result set as MySQL does. False on error."""
        conn = self.conn
        try:
            columns = await result.stream.open()
        except BaseException as exc:
            result.stream.close()
            if not isinstance(exc, SqlError):
                raise
            self._send_sql_error(exc)
            return False
        conn.send(lenenc_int(len(columns)))
        for column in columns:
            conn.send(column.encode())
        if not conn.deprecate_eof:
            conn.send(eof_packet(status=status & ~Status.MORE_RESULTS_EXISTS))
        try:
            async with contextlib.aclosing(result.stream.rows()) as batches:
                async for rows in batches:
                    await self._send_rows(rows)
        except SqlError as exc:
            self._send_sql_error(exc)
            return False
        end = (
            ok_packet(status=status, header=0xFE)
            if conn.deprecate_eof
            else eof_packet(status=status)
        )
        conn.send(end)
        return True

    async def _send_rows(self, rows: list[bytes] | FramedRows) -> None:
        """`rows` as packets, ROWS_PER_WRITE framed in one pass (row_packets) and written at a
        time: each write waits while the client does not read (back-pressure), then lets the
        loop's other sessions run. Rows framed already (a snapshot read's chunk) get their
        sequence ids in one pass and go out BYTES_PER_WRITE at a time, no copy."""
        conn = self.conn
        if isinstance(rows, FramedRows):
            data = rows.data
            seq = stamp(data, conn.seq)
            view = memoryview(data)
            for at in range(0, len(data), BYTES_PER_WRITE):
                conn.send_framed(view[at : at + BYTES_PER_WRITE], seq)
                await conn.flush()
                await asyncio.sleep(0)
            return
        start, end = 0, len(rows)
        while start < end:
            data, n, seq = frame_rows(rows, start, min(end, start + ROWS_PER_WRITE), conn.seq)
            if n:
                conn.send_framed(data, seq)
            else:  # a row of 16 MB or more: split into packets
                conn.send(rows[start])
                n = 1
            start += n
            await conn.flush()
            await asyncio.sleep(0)

    # -- replication ---------------------------------------------------------------------------
    def _register_replica(self, body: bytes) -> None:
        try:
            self.replication.register_replica(body)
        except SqlError as exc:
            self._send_sql_error(exc)
            return
        self._send_ok()

    async def _binlog_dump(self, body: bytes, *, by_gtid: bool) -> None:
        try:
            await self.replication.dump(body, self.conn, by_gtid=by_gtid)
        except SqlError as exc:  # refused before it began
            self._send_sql_error(exc)
            await self.conn.flush()
