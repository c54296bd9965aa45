"""One client connection: handshake v10 and authentication (native, caching_sha2 fast path,
auth switch), the command loop, multi-statement queries, and COM_BINLOG_DUMP hand-off."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import struct
import time

from cdc.config import DumperUser
from cdc.protocol import auth
from cdc.protocol.constants import Capability as Cap
from cdc.protocol.constants import Command, Status
from cdc.protocol.packets import (
    MAX_CHUNK,
    PacketBuffer,
    ProtocolError,
    eof_packet,
    err_packet,
    frame,
    ok_packet,
    read_lenenc_str,
    read_nul_str,
)
from cdc.protocol.resultset import Column, result_set_packets, text_row
from cdc.protocol.tls_stream import TlsStream
from dumper.server import prepared, sql
from dumper.server.ack_gate import parse_ack
from dumper.server.binlog_sender import (
    MIN_HEARTBEAT_PERIOD_S,
    BinlogSender,
    DumpError,
    DumpOptions,
    DumpRequest,
)
from dumper.server.context import Registration, ServerContext, SessionState
from dumper.server.gtid_state import brief, parse_dump_gtid
from dumper.server.queries import OkResult, QueryExecutor, RowsResult, denied
from dumper.server.users import has_any, verify_caching_sha2, verify_native

log = logging.getLogger(__name__)
# Rows (or skipped events) of a streamed result set per loop turn: ~1 ms of work.
ROWS_PER_TURN = 64

SERVER_CAPABILITIES = (
    Cap.LONG_PASSWORD
    | Cap.FOUND_ROWS
    | Cap.LONG_FLAG
    | Cap.CONNECT_WITH_DB
    | Cap.PROTOCOL_41
    | Cap.INTERACTIVE
    | Cap.TRANSACTIONS
    | Cap.SECURE_CONNECTION
    | Cap.MULTI_STATEMENTS
    | Cap.MULTI_RESULTS
    | Cap.PS_MULTI_RESULTS
    | Cap.PLUGIN_AUTH
    | Cap.CONNECT_ATTRS
    | Cap.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | Cap.DEPRECATE_EOF
)
CHARSET_UTF8MB4_GENERAL_CI = 45
# Before login a packet is the handshake response (or an auth switch reply): MySQL caps its
# connection attributes at 64 KiB, so anything much larger is an attack on memory, refused
# before it is buffered.
MAX_HANDSHAKE_PACKET = 128 << 10
ER_NET_PACKET_TOO_LARGE = 1153
ER_NET_PACKETS_OUT_OF_ORDER = 1156
ER_NET_READ_INTERRUPTED = 1159
COM_STATISTICS = 0x09
COM_RESET_CONNECTION = 0x1F
READ_SIZE = 1 << 16


def _u32(body: bytes) -> int:
    return int.from_bytes(body[:4], "little")


class _Closed(Exception):
    """The peer went away (or sent something that ends the connection)."""


class _Idle(Exception):
    """No command came within the session's wait_timeout."""


class _Fatal(Exception):
    """A framing error MySQL answers with an ERR and then closes the connection."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Session:
    """Lives as long as its connection; `run` never raises."""

    def __init__(
        self,
        ctx: ServerContext,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.state = SessionState(ctx.next_connection_id(), str(peer[0]), int(peer[1]))
        self.executor = QueryExecutor(ctx, self.state)
        self._prepared: dict[int, prepared.Prepared] = {}
        self._next_stmt_id = 1
        self.client_caps = 0
        # Only for reading what a client sends during a dump (commands are read packet by packet)
        self._buf = PacketBuffer(max_payload=ctx.config.max_allowed_packet)
        self._seq = 0
        self._out: list[bytes] = []
        self._task: asyncio.Task | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> None:
        self._task = asyncio.current_task()
        cid = self.state.conn_id
        cfg = self.ctx.config
        try:
            # max_connections + 1 at accept: the spare slot is an admin's, checked after login
            waiting = sum(1 for s in self.ctx.sessions.values() if s.state.user is None)
            if (
                len(self.ctx.sessions) > cfg.max_connections
                or waiting >= cfg.max_unauthenticated_connections
            ):
                self._seq = 0
                self.send(err_packet(1040, "Too many connections", "08004"))
                await self.flush()
                return
            self.ctx.sessions[cid] = self
            if await asyncio.wait_for(self._handshake(), cfg.connect_timeout):
                await self._command_loop()
        except _Fatal as exc:
            log.info("connection %d from %s closed: %s", cid, self.state.host, exc.message)
            self._out.clear()
            self.send(err_packet(exc.code, exc.message, "08S01"))
            with contextlib.suppress(ConnectionError, OSError):
                await asyncio.wait_for(self.flush(), 5)
        except (_Closed, ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # KILL or server shutdown
        except Exception:
            log.exception("connection %d from %s: internal error", cid, self.state.host)
        finally:
            self.ctx.sessions.pop(cid, None)
            self.ctx.replicas.pop(cid, None)
            self.writer.close()

    def kill(self) -> None:
        self.writer.close()
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    # -- packets -------------------------------------------------------------------------------
    async def read_packet(self, limit: int | None = None, idle: float | None = None) -> bytes:
        """One (possibly multi-packet) client payload, reading not a byte beyond it (after an SSL
        request the next bytes are the TLS handshake, which must stay in the stream). Like
        MySQL's my_net_read: each packet must carry the expected sequence id (ER 1156), and a
        payload longer than `limit` (default the session's max_allowed_packet) is refused (ER
        1153) from its header, before its bytes are read. The first byte may take `idle`
        seconds (_Idle after that; None = no bound); once a command has begun, each further
        read gets net_read_timeout (ER 1159), so a half-sent packet cannot hold a connection."""
        if limit is None:
            limit = self.ctx.config.max_allowed_packet
        parts: list[bytes] = []
        total = 0
        while True:
            if not parts and idle is not None:
                try:
                    async with asyncio.timeout(idle):
                        header = await self.reader.readexactly(1)
                except TimeoutError:
                    raise _Idle() from None
                except asyncio.IncompleteReadError:
                    raise _Closed() from None
                header += await self._read_more(3)
            else:
                header = await self._read_more(4)
            length = int.from_bytes(header[:3], "little")
            if header[3] != self._seq:
                raise _Fatal(ER_NET_PACKETS_OUT_OF_ORDER, "Got packets out of order")
            self._seq = (self._seq + 1) & 0xFF
            total += length
            if total > limit:
                raise _Fatal(
                    ER_NET_PACKET_TOO_LARGE, "Got a packet bigger than 'max_allowed_packet' bytes"
                )
            parts.append(await self._read_more(length))
            if length < MAX_CHUNK:
                return parts[0] if len(parts) == 1 else b"".join(parts)

    async def _read_more(self, n: int) -> bytes:
        """`n` bytes of a command already begun, within the session's net_read_timeout."""
        try:
            async with asyncio.timeout(self._net_read_timeout()):  # no task per read (wait_for)
                return await self.reader.readexactly(n)
        except TimeoutError:
            raise _Fatal(
                ER_NET_READ_INTERRUPTED, "Got timeout reading communication packets"
            ) from None
        except asyncio.IncompleteReadError:
            raise _Closed() from None

    def send(self, payload: bytes) -> None:
        data, self._seq = frame(payload, self._seq)
        self._out.append(data)

    @property
    def seq(self) -> int:
        """The sequence id of the next packet."""
        return self._seq

    def send_framed(self, data: bytes | bytearray, seq: int) -> None:
        """Packets framed already (a batch shared by several dumps), `seq` the id after them."""
        self._out.append(data)
        self._seq = seq

    async def flush(self) -> None:
        out = self._out
        if out:
            # A shared batch alone is written as it is: no copy per consumer.
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
        await self.writer.drain()

    def _send_error(self, code: int, message: str, state: str = "HY000") -> None:
        self.send(err_packet(code, message, state))

    def _send_ok(self, status: int = Status.AUTOCOMMIT) -> None:
        self.send(ok_packet(status=status))

    @property
    def deprecate_eof(self) -> bool:
        return bool(self.client_caps & Cap.DEPRECATE_EOF)

    # -- handshake -----------------------------------------------------------------------------
    async def _handshake(self) -> bool:
        salt = bytes(b % 127 + 1 for b in os.urandom(20))  # printable-ish, no NUL (like MySQL)
        caps = int(SERVER_CAPABILITIES) | (Cap.SSL if self.ctx.tls is not None else 0)
        greeting = (
            b"\x0a"
            + handshake_version(self.ctx.config).encode()
            + b"\0"
            + struct.pack("<I", self.state.conn_id)
            + salt[:8]
            + b"\0"
            + struct.pack(
                "<HBHHB",
                caps & 0xFFFF,
                CHARSET_UTF8MB4_GENERAL_CI,
                Status.AUTOCOMMIT,
                caps >> 16,
                21,
            )
            + bytes(10)
            + salt[8:]
            + b"\0"
            + auth.NATIVE.encode()
            + b"\0"
        )
        self._seq = 0
        self.send(greeting)
        await self.flush()
        payload = await self.read_packet(MAX_HANDSHAKE_PACKET)
        try:
            name, response, plugin = self._parse_handshake_response(payload)
        except (ProtocolError, IndexError, struct.error, UnicodeDecodeError):
            self._send_error(1043, "Bad handshake", "08S01")
            await self.flush()
            return False
        if name is None:  # SSL request: upgrade, then the real response comes encrypted
            if self.ctx.tls is None:
                self._send_error(1043, "SSL is not supported by the binlog server", "08S01")
                await self.flush()
                return False
            try:
                tls = TlsStream(self.reader, self.writer, self.ctx.tls)
                await tls.handshake()
                self.reader = self.writer = tls  # type: ignore[assignment]
                payload = await self.read_packet(MAX_HANDSHAKE_PACKET)
                name, response, plugin = self._parse_handshake_response(payload)
            except (
                ssl.SSLError,
                OSError,
                ProtocolError,
                IndexError,
                struct.error,
                UnicodeDecodeError,
            ) as exc:
                log.info("%s: TLS handshake failed: %s", self.state.host, exc)
                return False
            if name is None:
                return False
        user = self.ctx.user(name)
        # An unknown user goes through the same steps as a known one with a wrong password
        # (same packets, same order, then 1045): nothing tells them apart (no enumeration).
        ok, response = await self._authenticate(user or _nobody(name), plugin, salt, response)
        ok = ok and user is not None
        if not ok:
            using = "YES" if response else "NO"
            self._send_error(
                1045,
                f"Access denied for user '{name}'@'{self.state.host}' (using password: {using})",
                "28000",
            )
            await self.flush()
            return False
        if len(self.ctx.sessions) > self.ctx.config.max_connections and not has_any(
            user, "SUPER", "CONNECTION ADMIN"
        ):  # the one slot beyond max_connections is kept for an administrator, as in MySQL
            self._send_error(1040, "Too many connections", "08004")
            await self.flush()
            return False
        self.state.user = user
        self.state.command = "Sleep"
        self._send_ok()
        await self.flush()
        return True

    def _parse_handshake_response(self, p: bytes) -> tuple[str | None, bytes, str]:
        caps, _max_packet, _charset = struct.unpack_from("<IIB", p, 0)
        if not caps & Cap.PROTOCOL_41:
            raise ProtocolError("pre-4.1 client")
        self.client_caps = caps
        if len(p) == 32:
            if caps & Cap.SSL:
                return None, b"", ""
            raise ProtocolError("handshake response without a user name")
        user, pos = read_nul_str(p, 32)
        if caps & Cap.PLUGIN_AUTH_LENENC_CLIENT_DATA:
            response, pos = read_lenenc_str(p, pos)
        elif caps & Cap.SECURE_CONNECTION:
            n = p[pos]
            response, pos = p[pos + 1 : pos + 1 + n], pos + 1 + n
        else:
            response, pos = read_nul_str(p, pos)
        if caps & Cap.CONNECT_WITH_DB and pos < len(p):
            db, pos = read_nul_str(p + b"\0", pos)
            if db:
                self.state.db = db.decode()
        plugin = auth.NATIVE
        if caps & Cap.PLUGIN_AUTH and pos < len(p):
            raw, pos = read_nul_str(p + b"\0", pos)
            plugin = raw.decode() or auth.NATIVE
        return user.decode(), response or b"", plugin

    async def _authenticate(
        self, user: DumperUser, plugin: str, salt: bytes, response: bytes
    ) -> tuple[bool, bytes]:
        """Every failure takes the same path whatever the account (or its absence): a wrong
        caching_sha2 fast-auth answer, a user without sha2_digest and an unknown plugin all
        get the auth switch to mysql_native_password, then the native check."""
        if plugin == auth.CACHING_SHA2:
            if not user.password_hash and not user.sha2_digest and response == b"":
                return True, response
            if verify_caching_sha2(user, salt, response):
                self.send(b"\x01\x03")  # fast auth success; the OK follows
                return True, response
        if plugin != auth.NATIVE:
            # Auth switch: every client we serve speaks mysql_native_password.
            self.send(b"\xfe" + auth.NATIVE.encode() + b"\0" + salt + b"\0")
            await self.flush()
            response = await self.read_packet(MAX_HANDSHAKE_PACKET)
        return verify_native(user, salt, response), response

    # -- commands ------------------------------------------------------------------------------
    def _timeout(self, name: str) -> float:
        """A session timeout variable (SET wait_timeout = n, ...; else the reported default) in
        MySQL's range of 1 s to a year."""
        value = self.state.session_vars.get(name, self.ctx.variables.get(name))
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            seconds = float(self.ctx.variables.get(name) or 30)  # type: ignore[arg-type]
        return min(max(seconds, 1.0), 31536000.0)

    def _wait_timeout(self) -> float:
        return self._timeout("wait_timeout")

    def _net_read_timeout(self) -> float:
        return self._timeout("net_read_timeout")

    async def _command_loop(self) -> None:
        while True:
            self.state.command = "Sleep"
            self._seq = 0  # every command starts a new sequence
            try:
                payload = await self.read_packet(idle=self._wait_timeout())
            except _Idle:
                log.info(
                    "connection %d from %s: idle for wait_timeout (%.0f s), closed",
                    self.state.conn_id,
                    self.state.host,
                    self._wait_timeout(),
                )
                return
            if not payload:
                self._send_error(1047, "Unknown command (empty packet)", "08S01")
                await self.flush()
                continue
            cmd, body = payload[0], payload[1:]
            self.state.since = time.time()
            if cmd == Command.QUIT:
                return
            if cmd == Command.QUERY:
                self.state.command = "Query"
                await self._query(body)
            elif cmd == Command.PING:
                self._send_ok()
            elif cmd == Command.INIT_DB:
                self.state.db = body.decode("utf-8", "replace")
                self._send_ok()
            elif cmd == COM_RESET_CONNECTION:
                self.state.user_vars.clear()
                self.state.session_vars.clear()
                self._send_ok()
            elif cmd == Command.FIELD_LIST:
                self.send(ok_packet(header=0xFE) if self.deprecate_eof else eof_packet())
            elif cmd == COM_STATISTICS:
                self.send(f"Uptime: {int(time.time() - self.ctx.started)}".encode())
            elif cmd == Command.STMT_PREPARE:
                self.state.command = "Prepare"
                self._stmt_prepare(body)
            elif cmd == Command.STMT_EXECUTE:
                self.state.command = "Execute"
                self._stmt_execute(body)
            elif cmd == Command.STMT_SEND_LONG_DATA:  # no reply, as in MySQL
                if len(body) >= 6 and (stmt := self._prepared.get(_u32(body))) is not None:
                    param = int.from_bytes(body[4:6], "little")
                    if param < stmt.params:
                        stmt.long_data.setdefault(param, bytearray()).extend(body[6:])
                continue
            elif cmd == Command.STMT_CLOSE:  # no reply
                if len(body) >= 4:
                    self._prepared.pop(_u32(body), None)
                continue
            elif cmd == Command.STMT_RESET:
                if len(body) >= 4 and (stmt := self._prepared.get(_u32(body))) is not None:
                    stmt.long_data.clear()
                    self._send_ok()
                else:
                    self._send_error(
                        prepared.ER_UNKNOWN_STMT_HANDLER,
                        "Unknown prepared statement handler given to mysqld_stmt_reset",
                    )
            elif cmd == Command.REGISTER_SLAVE:
                self._register_slave(body)
            elif cmd == Command.BINLOG_DUMP or cmd == Command.BINLOG_DUMP_GTID:
                await self._binlog_dump(body, by_gtid=cmd == Command.BINLOG_DUMP_GTID)
                return  # like MySQL: a dump ends its connection
            else:
                self._send_error(1047, f"Unknown command 0x{cmd:02x}", "08S01")
            await self.flush()

    def _stmt_prepare(self, body: bytes) -> None:
        text = body.decode("utf-8", "replace")
        self.state.info = text[:200]
        try:
            if len(self._prepared) >= prepared.MAX_STATEMENTS:
                raise sql.SqlError(
                    "Can't create more than max_prepared_stmt_count statements "
                    f"(current value: {prepared.MAX_STATEMENTS})",
                    prepared.ER_MAX_PREPARED_STMT_COUNT_REACHED,
                    "42000",
                )
            stmt = prepared.prepare(text)
        except sql.SqlError as exc:
            self._send_error(exc.code, exc.message, exc.sql_state)
            return
        stmt_id = self._next_stmt_id
        self._next_stmt_id += 1
        self._prepared[stmt_id] = stmt
        # No result columns announced: they come with each EXECUTE's result set.
        self.send(struct.pack("<BIHHBH", 0, stmt_id, 0, stmt.params, 0, 0))
        if stmt.params:
            for _ in range(stmt.params):
                self.send(Column("?").encode())
            if not self.deprecate_eof:
                self.send(eof_packet())

    def _stmt_execute(self, body: bytes) -> None:
        stmt = self._prepared.get(_u32(body)) if len(body) >= 9 else None
        if stmt is None:
            self._send_error(
                prepared.ER_UNKNOWN_STMT_HANDLER,
                "Unknown prepared statement handler given to mysqld_stmt_execute",
            )
            return
        try:
            text = prepared.execute_text(stmt, body)
            self.state.info = text[:200]
            result = self.executor.execute(sql.parse(text))
            if not isinstance(result, OkResult) and not isinstance(result.rows, list):
                raise sql.SqlError(
                    "This command is not supported in the prepared statement protocol yet "
                    "(send it as a plain query)",
                    1295,
                )
        except sql.SqlError as exc:
            self._send_error(exc.code, exc.message, exc.sql_state)
            return
        finally:
            self.state.info = None
        if isinstance(result, OkResult):
            self.send(ok_packet(affected=result.affected, status=Status.AUTOCOMMIT))
            return
        for payload in result_set_packets(
            result.columns, result.rows, deprecate_eof=self.deprecate_eof, binary=True
        ):
            self.send(payload)

    def _require_replication(self) -> bool:
        user = self.state.user
        if user is not None and user.replication:
            return True
        err = denied("REPLICATION SLAVE")
        self._send_error(err.code, err.message, err.sql_state)
        return False

    async def _query(self, body: bytes) -> None:
        text = body.decode("utf-8", "replace")
        self.state.info = text[:200]
        try:
            statements = sql.split_statements(text)
            if not statements:
                raise sql.SqlError("Query was empty", 1065)
            if len(statements) > 1 and not self.client_caps & Cap.MULTI_STATEMENTS:
                raise sql.SqlError(
                    "You have an error in your SQL syntax: several statements in one query need "
                    "CLIENT_MULTI_STATEMENTS"
                )
        except sql.SqlError as exc:
            self._send_error(exc.code, exc.message, exc.sql_state)
            return
        for i, stmt in enumerate(statements):
            status = Status.AUTOCOMMIT | (
                Status.MORE_RESULTS_EXISTS if i + 1 < len(statements) else 0
            )
            try:
                result = self.executor.execute(sql.parse(stmt))
            except sql.SqlError as exc:
                self._send_error(exc.code, exc.message, exc.sql_state)
                break  # MySQL stops a multi-statement at the first error
            if isinstance(result, OkResult):
                self.send(ok_packet(affected=result.affected, status=status))
            elif isinstance(result.rows, list):
                for payload in result_set_packets(
                    result.columns, result.rows, deprecate_eof=self.deprecate_eof, status=status
                ):
                    self.send(payload)
            elif not await self._stream_rows(result, status):
                break
            if len(self._out) > 64:
                await self.flush()
            if i % 64 == 63:
                await asyncio.sleep(0)  # thousands of statements in one query: let others run
        self.state.info = None

    async def _stream_rows(self, result: RowsResult, status: int) -> bool:
        """A result set whose rows are read while sending (SHOW BINLOG EVENTS of a file of any
        size): at most ROWS_PER_TURN rows per loop turn, flushed with back-pressure, so neither
        memory nor the loop's other sessions depend on its size. An error part way through ends
        it with ERR, as MySQL does; False then (a multi-statement stops)."""
        head = result_set_packets(
            result.columns, [], deprecate_eof=self.deprecate_eof, status=status
        )
        for payload in head[:-1]:
            self.send(payload)
        budget = ROWS_PER_TURN
        try:
            for row in result.rows:
                if row is not None:
                    self.send(text_row(row))
                budget -= 1
                if budget <= 0:
                    await self.flush()  # waits while the client does not read
                    await asyncio.sleep(0)
                    budget = ROWS_PER_TURN
        except sql.SqlError as exc:
            self._send_error(exc.code, exc.message, exc.sql_state)
            return False
        self.send(head[-1])
        return True

    def _register_slave(self, body: bytes) -> None:
        if not self._require_replication():
            return
        try:
            (server_id,) = struct.unpack_from("<I", body, 0)
            pos, fields = 4, []
            for _ in range(3):  # host, user, password: 1-byte lengths
                n = body[pos]
                fields.append(body[pos + 1 : pos + 1 + n].decode("utf-8", "replace"))
                pos += 1 + n
            (port,) = struct.unpack_from("<H", body, pos)
        except (struct.error, IndexError):
            self._send_error(1105, "Malformed COM_REGISTER_SLAVE packet", "HY000")
            return
        self.ctx.replicas[self.state.conn_id] = Registration(
            server_id, fields[0] or self.state.host, fields[1], port, self.ctx.config.server_id
        )
        self._send_ok()

    # -- dump ----------------------------------------------------------------------------------
    def _dump_options(self) -> DumpOptions:
        uv = self.state.user_vars
        declared = uv.get("master_binlog_checksum", uv.get("source_binlog_checksum"))
        checksum = None
        if declared is not None:
            checksum = {"CRC32": True, "NONE": False}.get(str(declared).upper())
        period_ns = uv.get("master_heartbeat_period", uv.get("source_heartbeat_period"))
        try:
            period = float(period_ns) / 1e9 if period_ns is not None else None
        except (ValueError, OverflowError):
            period = None
        if period is None:
            period = self.ctx.config.default_heartbeat_ms / 1000
        if period > 0:  # 0 (or less) = no heartbeats; anything else at least the minimum
            period = max(period, MIN_HEARTBEAT_PERIOD_S)
        return DumpOptions(checksum=checksum, heartbeat_period=max(period, 0.0))

    async def _binlog_dump(self, body: bytes, *, by_gtid: bool) -> None:
        if not self._require_replication():
            await self.flush()
            return
        try:
            if by_gtid:
                request = await self._gtid_dump_request(body)
            elif (
                self.ctx.mariadb_gtids is not None and "slave_connect_state" in self.state.user_vars
            ):
                request = self._mariadb_gtid_dump_request(body)
            else:
                request = DumpRequest.parse(body)
        except DumpError as exc:
            log.info("dump for %s:%d refused: %s", self.state.host, self.state.port, exc.message)
            self._send_error(exc.code, exc.message)
            await self.flush()
            return
        self.state.command = "Binlog Dump GTID" if by_gtid else "Binlog Dump"
        sender = BinlogSender(
            self.ctx.files,
            self,
            self.ctx.notifier,
            server_id=self.ctx.config.server_id,
            poll_interval=self.ctx.config.poll_interval_ms / 1000,
            gate=self.ctx.acks,
            shared=self.ctx.shared_reads,
        )
        watcher = asyncio.create_task(self._watch_input(request.server_id))
        streamer = asyncio.create_task(self._stream(sender, request))
        self.state.dump = sender
        try:
            await asyncio.wait({watcher, streamer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.state.dump = None
            for task in (watcher, streamer):
                task.cancel()
            await asyncio.gather(watcher, streamer, return_exceptions=True)

    async def _gtid_dump_request(self, body: bytes) -> DumpRequest:
        """COM_BINLOG_DUMP_GTID: the file and position of the first transaction the client's
        GTID set lacks (`gtid_state`). In a thread: finding it may read a file's worth of
        bytes, and a set may hold a million intervals; neither may hold up other sessions."""
        state = self.ctx.gtid_state

        def start() -> tuple[DumpRequest, str]:
            request, client = parse_dump_gtid(body)
            if state is None:
                raise DumpError(
                    "The replication receiver thread cannot start in AUTO_POSITION mode: this "
                    "server has GTID_MODE = OFF instead of ON. Use file and position."
                )
            file, pos, exclude = state.dump_start(client)
            dump = DumpRequest(file, pos, request.flags, request.server_id, exclude)
            return dump, brief(str(client) or "nothing")

        request, client = await asyncio.to_thread(start)
        log.info(
            "GTID dump for %s:%d: the client has %s; from %s:%d%s",
            self.state.host,
            self.state.port,
            client,
            request.file,
            request.pos,
            ", less the transactions it has after a gap" if request.exclude else "",
        )
        return request

    def _mariadb_gtid_dump_request(self, body: bytes) -> DumpRequest:
        """COM_BINLOG_DUMP of a MariaDB replica in GTID mode (`@slave_connect_state` set; its
        file name and position are ignored, as MariaDB's master does): the file and position
        of the transaction after its GTID (`mariadb_gtid_state`)."""
        request = DumpRequest.parse(body)
        uv = self.state.user_vars
        state = self.ctx.mariadb_gtids
        assert state is not None
        connect = "" if uv.get("slave_connect_state") is None else str(uv["slave_connect_state"])
        file, pos = state.dump_start(
            connect,
            strict=_flag(uv.get("slave_gtid_strict_mode")),
            ignore_duplicates=_flag(uv.get("slave_gtid_ignore_duplicates")),
        )
        until_text = uv.get("slave_until_gtid")
        until = None if until_text is None else state.until(connect, str(until_text))
        log.info(
            "MariaDB GTID dump for %s:%d: the replica is at %r; from %s:%d%s",
            self.state.host,
            self.state.port,
            connect,
            file,
            pos,
            "" if until_text is None else f", until {until_text!r}",
        )
        return DumpRequest(file, pos, request.flags, request.server_id, until=until)

    async def _stream(self, sender: BinlogSender, request: DumpRequest) -> None:
        try:
            self.state.info = f"{request.file}:{request.pos}"
            await sender.run(request, self._dump_options())
        except DumpError as exc:
            log.info("dump for %s:%d ended: %s", self.state.host, self.state.port, exc.message)
            self._send_error(exc.code, exc.message)
            await self.flush()
            return
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug or an unreadable file: tell the client, keep the server
            log.exception("dump for %s:%d failed", self.state.host, self.state.port)
            self._send_error(1236, f"internal error of the binlog server while sending: {exc}")
            await self.flush()
            return
        # Non-blocking dump done: EOF (an OK with 0xFE header for DEPRECATE_EOF clients).
        self.send(ok_packet(header=0xFE) if self.deprecate_eof else eof_packet())
        await self.flush()

    async def _watch_input(self, server_id: int) -> None:
        """Read what the client sends during a dump so that a disconnect is seen at once: a
        follower's semi-sync style acknowledgements go to the gate, the rest (COM_PING, a
        MariaDB replica's semi-sync ACKs) is dropped."""
        gate = self.ctx.acks
        if gate is None or not gate.is_follower(server_id):
            while await self.reader.read(READ_SIZE):
                pass
            return
        while data := await self.reader.read(READ_SIZE):
            self._buf.feed(data)
            try:
                packets = self._buf.packets()
            except ProtocolError:
                return
            for payload in packets:
                ack = parse_ack(payload)
                if ack is not None:
                    gate.record(server_id, *ack)


def _nobody(name: str) -> DumperUser:
    """A stand-in for an unknown user: a random password hash no answer matches, so the login
    costs the same work as a real one and fails the same way."""
    return DumperUser(name, "*" + os.urandom(20).hex().upper(), os.urandom(32).hex())


def _flag(value: object) -> bool:
    """A replica's `SET @slave_gtid_strict_mode=1` (an int, or text from some clients)."""
    try:
        return int(value or 0) != 0  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False


def handshake_version(config) -> str:
    """The greeting's server version: MariaDB's prefix it with `5.5.5-` (so that old MySQL
    clients parse a 5.x version; MariaDB's clients and replicas strip it), as the mariadb
    flavour does; @@version and the files' FDE carry the plain version."""
    return ("5.5.5-" if config.flavor == "mariadb" else "") + config.version
