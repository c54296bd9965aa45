"""The CN's connections to the DNs and the GMS: our asyncio protocol client
(`cdc.protocol.client`) behind the small connection/cursor/pool interface the CN uses (the
part of aiomysql's it was first written against).

Why not aiomysql: a CN transaction is 3-4 round trips of tiny statements, and aiomysql spends
more Python per round trip than the statement costs the DN (a cursor and packet objects per
result, two stream reads per packet, and a pool that walks every free connection on each
acquire). Here a round trip is one write and, usually, one read cut into packets by
`PacketBuffer`. Results are what pymysql returns: rowcount = changed rows (no FOUND_ROWS),
typed row values by pymysql's decoders, and server errors raised as pymysql's exception
classes (`pymysql.err.IntegrityError` for a duplicate key, ...), which the CN's error
handling is written against. A connection that breaks raises `OperationalError(2013)`.
Not the administrative client (`cdc.admin_sql`, PyMySQL) either: that one blocks a thread per
statement, and the commit path runs its round trips on the event loop. Called from the loop
through `asyncio.to_thread`, a PyMySQL round trip (an autocommit UPDATE on a local MariaDB,
3 × 3,000) cost 206-251 µs of CPU, this one 137-196 µs (PyMySQL blocking the loop: 69-97 µs).
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque

import pymysql
from pymysql.connections import TEXT_TYPES
from pymysql.constants import FIELD_TYPE
from pymysql.converters import decoders, through
from pymysql.protocol import FieldDescriptorPacket

from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import Capability, Command
from cdc.protocol.packets import ERR, OK, ProtocolError, read_lenenc_int, read_lenenc_str

CR_SERVER_LOST = 2013
SERVER_MORE_RESULTS_EXISTS = 0x0008
_U16 = struct.Struct("<H")


class Cursor:
    """One statement's (or a multi-statement packet's) results, read as they are asked for:
    `execute` reads the first result, `nextset` the next one (raising its error)."""

    __slots__ = ("_conn", "rowcount", "lastrowid", "description", "_rows", "_more")

    def __init__(self, conn: DnConnection):
        self._conn = conn
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.description: tuple | None = None
        self._rows: list[tuple] = []
        self._more = False

    async def __aenter__(self) -> Cursor:
        return self

    async def __aexit__(self, *exc) -> None:
        return None

    async def execute(self, sql: str, params=None) -> int:
        if params is not None:
            sql = sql % tuple(pymysql.converters.escape_item(p, "utf8mb4") for p in params)
        await self._conn.send_query(sql)
        await self._read()
        return self.rowcount

    async def nextset(self) -> bool | None:
        if not self._more:
            return None
        await self._read()
        return True

    async def fetchall(self) -> list[tuple]:
        rows, self._rows = self._rows, []
        return rows

    async def fetchmany(self, size: int) -> list[tuple]:
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def fetchone(self) -> tuple | None:
        return self._rows.pop(0) if self._rows else None

    async def _read(self) -> None:
        self._more = False  # an error ends the packet's results (MariaDB stops there)
        (
            self.rowcount,
            self.lastrowid,
            self.description,
            self._rows,
            self._more,
        ) = await self._conn.read_result()


class DnConnection:
    """One autocommit connection (utf8mb4) to a DN. Not for concurrent use by several tasks."""

    __slots__ = ("_client", "_broken")

    def __init__(self, client: MysqlClient):
        self._client = client
        self._broken = False

    @classmethod
    async def connect(
        cls, host: str, port: int, user: str, password: str, multi_statements: bool, timeout: float
    ) -> DnConnection:
        try:
            client = await MysqlClient.connect(
                host,
                port,
                user,
                password,
                timeout=timeout,
                flags=Capability.MULTI_STATEMENTS if multi_statements else 0,
            )
        except (OSError, ProtocolError, TimeoutError) as exc:
            raise pymysql.err.OperationalError(
                2003, f"Can't connect to MySQL server on {host}:{port} ({exc})"
            ) from exc
        except Exception as exc:  # an ERR packet at login (ServerError)
            raise pymysql.err.OperationalError(getattr(exc, "code", 2003), str(exc)) from exc
        return cls(client)

    @property
    def closed(self) -> bool:
        return self._broken or self._client.closed

    @property
    def connection_id(self) -> int:
        """The session's id on the DN (its `CONNECTION_ID()`, from the handshake)."""
        return self._client.handshake.connection_id if self._client.handshake else 0

    def cursor(self) -> _CursorContext:
        return _CursorContext(self)

    def close(self) -> None:
        self._broken = True
        self._client.close()

    def _lost(self, exc: BaseException) -> pymysql.err.OperationalError:
        self.close()
        return pymysql.err.OperationalError(CR_SERVER_LOST, f"Lost connection to the DN ({exc})")

    async def send_query(self, sql: str) -> None:
        if self._broken:
            raise pymysql.err.InterfaceError(0, "the connection is closed")
        try:
            await self._client.send_command(Command.QUERY, sql.encode())
        except (OSError, ConnectionError) as exc:
            raise self._lost(exc) from exc

    async def read_result(self) -> tuple[int, int | None, tuple | None, list[tuple], bool]:
        """(rowcount, insert id, description, rows, more results follow) of the next result."""
        try:
            return await self._read_result()
        except (OSError, ConnectionError, ProtocolError, IndexError, struct.error) as exc:
            raise self._lost(exc) from exc

    async def _read_result(self) -> tuple[int, int | None, tuple | None, list[tuple], bool]:
        first, columns, packets, last = await self._client.read_result()
        head = first[0]
        if head == OK:
            affected, pos = read_lenenc_int(first, 1)
            insert_id, pos = read_lenenc_int(first, pos)
            status = _U16.unpack_from(first, pos)[0]
            return affected or 0, insert_id, None, [], bool(status & SERVER_MORE_RESULTS_EXISTS)
        if head == ERR:
            pymysql.err.raise_mysql_exception(first)
        if last[0] == ERR:
            pymysql.err.raise_mysql_exception(last)
        fields = [FieldDescriptorPacket(c, "utf-8") for c in columns]
        converters = [_converter(f) for f in fields]
        rows = []
        for packet in packets:
            pos, values = 0, []
            for encoding, convert in converters:
                value, pos = read_lenenc_str(packet, pos)
                if value is not None:
                    if encoding is not None:
                        value = value.decode(encoding)
                    if convert is not None:
                        value = convert(value)
                values.append(value)
            rows.append(tuple(values))
        description = tuple(f.description() for f in fields)
        more = bool(_U16.unpack_from(last, 3)[0] & SERVER_MORE_RESULTS_EXISTS)
        return len(rows), None, description, rows, more


def _converter(field: FieldDescriptorPacket):
    """(text encoding or None for bytes, decoder or None) of a column, as pymysql has them."""
    kind = field.type_code
    if kind == FIELD_TYPE.JSON:
        encoding = "utf-8"
    elif kind in TEXT_TYPES:
        encoding = None if field.charsetnr == 63 else "utf-8"  # 63: binary
    else:
        encoding = "ascii"
    convert = decoders.get(kind)
    return encoding, None if convert is through else convert


class _CursorContext:
    """`await conn.cursor()` and `async with conn.cursor() as cur`, as aiomysql had it."""

    __slots__ = ("_cursor",)

    def __init__(self, conn: DnConnection):
        self._cursor = Cursor(conn)

    def __await__(self):
        if False:  # pragma: no cover - makes this a generator, as __await__ must be
            yield
        return self._cursor

    async def __aenter__(self) -> Cursor:
        return self._cursor

    async def __aexit__(self, *exc) -> None:
        return None


class DnPool:
    """At most `maxsize` connections to one DN. Free ones are reused most recently used first
    (a warm connection and DN thread); a connection given back goes straight to the oldest
    waiter; a closed one is dropped (a waiter may then open a new one)."""

    def __init__(self, connect, maxsize: int):
        self._connect = connect
        self.maxsize = maxsize
        self._free: list[DnConnection] = []
        self._used = 0  # handed out or being opened
        self._waiters: deque[asyncio.Future] = deque()
        self._closed = False

    @property
    def size(self) -> int:
        return len(self._free) + self._used

    async def acquire(self) -> DnConnection:
        while True:
            if self._closed:
                raise pymysql.err.InterfaceError(0, "the DN pool is closed")
            while self._free:
                conn = self._free.pop()
                if not conn.closed:
                    self._used += 1
                    return conn
            if self._used < self.maxsize:
                self._used += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._used -= 1
                    self._wake(None)
                    raise
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                conn = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    self.release(waiter.result())  # handed over as we were cancelled
                raise
            if conn is not None:
                return conn  # counted as used by release()

    def release(self, conn: DnConnection) -> None:
        self._used -= 1
        if conn.closed or self._closed:
            conn.close()
            self._wake(None)  # room for a new connection
            return
        if not self._wake(conn):
            self._free.append(conn)

    def _wake(self, conn: DnConnection | None) -> bool:
        """Hand `conn` (or, None, the right to open one) to the oldest live waiter."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                if conn is not None:
                    self._used += 1
                waiter.set_result(conn)
                return True
        return False

    def close(self) -> None:
        self._closed = True
        while self._free:
            self._free.pop().close()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def wait_closed(self) -> None:
        return None
