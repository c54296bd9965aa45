"""A small asyncio MySQL client: handshake, authentication, text queries, raw commands.

Just enough for the DN binlog dump client, the reference CN's connections (cdc/cn_protocol/dn_conn.py)
and tests that talk to our own server; other SQL work uses pymysql. Reads go through `PacketBuffer` in large chunks.

Why a second client beside the administrative one (`cdc.admin_sql`, PyMySQL): PyMySQL has no
replication protocol (COM_BINLOG_DUMP, the dump's raw event stream, semi-sync replies), and it
blocks a thread per round trip where these callers live on an event loop (the dump client, the
CN's commit path, a MergeSource's `XA RECOVER` after a DN restart, beside its dump).
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from cdc.protocol import auth
from cdc.protocol.constants import Capability as Cap
from cdc.protocol.constants import Command
from cdc.protocol.packets import (
    ERR,
    OK,
    PacketBuffer,
    ProtocolError,
    ServerError,
    frame,
    is_eof,
    parse_err,
    read_lenenc_int,
    read_lenenc_str,
    read_nul_str,
)
from cdc.sockets import bound_stream

CLIENT_CAPABILITIES = (
    Cap.LONG_PASSWORD
    | Cap.LONG_FLAG
    | Cap.PROTOCOL_41
    | Cap.TRANSACTIONS
    | Cap.SECURE_CONNECTION
    | Cap.MULTI_RESULTS
    | Cap.PLUGIN_AUTH
    | Cap.PLUGIN_AUTH_LENENC_CLIENT_DATA
)
UTF8MB4_GENERAL_CI = 45
READ_SIZE = 1 << 18


@dataclass(slots=True)
class Handshake:
    protocol: int
    server_version: str
    connection_id: int
    salt: bytes
    capabilities: int
    charset: int
    status: int
    auth_plugin: str


def parse_handshake(payload: bytes) -> Handshake:
    if not payload or payload[0] == ERR:
        raise parse_err(payload) if payload else ProtocolError("empty handshake")
    if payload[0] != 10:
        raise ProtocolError(f"unsupported handshake protocol version {payload[0]}")
    try:
        version, pos = read_nul_str(payload, 1)
        conn_id = struct.unpack_from("<I", payload, pos)[0]
        salt1 = payload[pos + 4 : pos + 12]
        pos += 13
        cap_low = struct.unpack_from("<H", payload, pos)[0]
        charset = payload[pos + 2]
        status = struct.unpack_from("<H", payload, pos + 3)[0]
        cap_high = struct.unpack_from("<H", payload, pos + 5)[0]
        auth_len = payload[pos + 7]
        pos += 18
        caps = cap_low | cap_high << 16
        salt2_len = max(13, auth_len - 8)
        salt2 = payload[pos : pos + salt2_len].rstrip(b"\0")
        pos += salt2_len
        plugin = (
            read_nul_str(payload + b"\0", pos)[0].decode()
            if caps & Cap.PLUGIN_AUTH
            else auth.NATIVE
        )
    except (IndexError, struct.error) as exc:
        raise ProtocolError(f"truncated handshake packet ({exc})") from None
    return Handshake(
        10, version.decode(errors="replace"), conn_id, salt1 + salt2, caps, charset, status, plugin
    )


@dataclass(slots=True)
class ResultSet:
    columns: list[str] = field(default_factory=list)
    rows: list[tuple[str | None, ...]] = field(default_factory=list)
    affected_rows: int = 0


class MysqlClient:
    """One connection. Not safe for concurrent use by several tasks."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader = reader
        self._writer = writer
        self._buffer = PacketBuffer()
        self._pending: list[bytes] = []
        self._seq = 0
        self.handshake: Handshake | None = None

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        user: str,
        password: str = "",
        database: str | None = None,
        timeout: float = 10.0,
        flags: int = 0,
    ) -> MysqlClient:
        """`flags`: capabilities asked for beyond the default ones (MULTI_STATEMENTS)."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        bound_stream(writer)  # a cut link ends the connection, not the caller's wait
        client = cls(reader, writer)
        try:
            await asyncio.wait_for(client._authenticate(user, password, database, flags), timeout)
        except BaseException:
            client.close()
            raise
        return client

    # -- packets ----------------------------------------------------------------------------------
    async def _fill(self) -> None:
        while not self._pending:
            data = await self._reader.read(READ_SIZE)
            if not data:
                raise ConnectionResetError("server closed the connection")
            self._buffer.feed(data)
            self._pending = self._buffer.packets()
            self._pending.reverse()

    async def read_packet(self) -> bytes:
        await self._fill()
        payload = self._pending.pop()
        self._seq = (self._buffer.seq + 1) & 0xFF
        return payload

    async def read_raw(self, size: int = READ_SIZE) -> bytes:
        """The next bytes of the stream as they come, not cut into packets (the binlog dump walks
        them itself, `merge_source/scan.py`): first anything already received, then one read.
        Not to be mixed with `read_packet` on the same stream."""
        if self._pending:  # packets already cut: framed again (only right after a command)
            out = b"".join(frame(p, self._buffer.seq)[0] for p in self._pending[::-1])
            self._pending = []
            return out + self._buffer.take_raw()
        data = self._buffer.take_raw()
        if data:
            return data
        data = await self._reader.read(size)
        if not data:
            raise ConnectionResetError("server closed the connection")
        return data

    def write_packet(self, payload: bytes, seq: int | None = None) -> None:
        data, self._seq = frame(payload, self._seq if seq is None else seq)
        self._writer.write(data)

    async def send_command(self, command: Command, body: bytes = b"") -> None:
        self.write_packet(bytes((command,)) + body, seq=0)
        await self._writer.drain()

    # -- authentication ---------------------------------------------------------------------------
    async def _authenticate(
        self, user: str, password: str, database: str | None, flags: int = 0
    ) -> None:
        hs = parse_handshake(await self.read_packet())
        self.handshake = hs
        caps = (CLIENT_CAPABILITIES | flags) & hs.capabilities | Cap.PROTOCOL_41
        if database:
            caps |= Cap.CONNECT_WITH_DB
        plugin = (
            hs.auth_plugin if hs.auth_plugin in (auth.NATIVE, auth.CACHING_SHA2) else auth.NATIVE
        )
        response = self._scramble(plugin, password, hs.salt)
        body = struct.pack("<IIB23x", caps, 1 << 24, UTF8MB4_GENERAL_CI) + user.encode() + b"\0"
        body += bytes((len(response),)) + response
        if database:
            body += database.encode() + b"\0"
        body += plugin.encode() + b"\0"
        self.write_packet(body)
        await self._writer.drain()
        while True:
            reply = await self.read_packet()
            if reply[0] == OK:
                return
            if reply[0] == ERR:
                raise parse_err(reply)
            if reply[0] == 0xFE:  # auth switch request: plugin name, then new salt
                name, pos = read_nul_str(reply + b"\0", 1)
                plugin, salt = name.decode(), reply[pos:].rstrip(b"\0")
                self.write_packet(self._scramble(plugin, password, salt))
                await self._writer.drain()
            elif reply[0] == 0x01 and reply[1:2] == b"\x03":  # caching_sha2 fast auth ok
                continue
            elif reply[0] == 0x01 and reply[1:2] == b"\x04":
                raise ProtocolError(
                    "caching_sha2_password full authentication needs TLS or RSA; "
                    "use a mysql_native_password user"
                )
            else:
                raise ProtocolError(f"unexpected authentication reply 0x{reply[0]:02x}")

    @staticmethod
    def _scramble(plugin: str, password: str, salt: bytes) -> bytes:
        if plugin == auth.CACHING_SHA2:
            return auth.caching_sha2_scramble(password, salt)
        if plugin == auth.NATIVE:
            return auth.native_scramble(password, salt)
        raise ProtocolError(f"unsupported authentication plugin {plugin!r}")

    # -- queries ----------------------------------------------------------------------------------
    async def query(self, sql: str) -> ResultSet:
        """Run one statement with the text protocol; rows come back as strings (or None)."""
        await self.send_command(Command.QUERY, sql.encode())
        first, columns, rows, last = await self.read_result()
        if first[0] == ERR:
            raise parse_err(first)
        if first[0] == OK:
            affected, _ = read_lenenc_int(first, 1)
            return ResultSet(affected_rows=affected or 0)
        if last[0] == ERR:
            raise parse_err(last)
        result = ResultSet()
        for col in columns:
            pos = 0
            for _ in range(5):  # catalog, schema, table, org_table, then the name
                name, pos = read_lenenc_str(col, pos)
            result.columns.append((name or b"").decode())
        for row in rows:
            pos, values = 0, []
            for _ in columns:
                value, pos = read_lenenc_str(row, pos)
                values.append(None if value is None else value.decode(errors="replace"))
            result.rows.append(tuple(values))
        return result

    async def read_result(self) -> tuple[bytes, list[bytes], list[bytes], bytes]:
        """The packets of the next result of a text-protocol query: (the first packet: OK, ERR
        or the column count; the column definitions; the rows; the packet that ended them, EOF
        with the status flags or an ERR). An OK or ERR first packet is the whole result."""
        first = await self.read_packet()
        if first[0] in (OK, ERR):
            return first, [], [], first
        count, _ = read_lenenc_int(first, 0)
        columns = [await self.read_packet() for _ in range(count or 0)]
        if not is_eof(await self.read_packet()):
            raise ProtocolError("expected EOF after column definitions")
        rows: list[bytes] = []
        append = rows.append
        while True:
            # The rows already received, taken without a coroutine each (a snapshot read's
            # page is 10,000 of them; read_packet's bookkeeping once per batch).
            await self._fill()
            pending = self._pending
            while pending:
                packet = pending.pop()
                if is_eof(packet) or packet[0] == ERR:
                    self._seq = (self._buffer.seq + 1) & 0xFF
                    return first, columns, rows, packet
                append(packet)

    async def ping(self) -> None:
        await self.send_command(Command.PING)
        reply = await self.read_packet()
        if reply[0] == ERR:
            raise parse_err(reply)

    @property
    def closed(self) -> bool:
        """Closed by us, or the server's end is closed (seen as end of stream)."""
        return self._writer.is_closing() or self._reader.at_eof()

    def close(self) -> None:
        if not self._writer.is_closing():
            self._writer.close()

    async def quit(self) -> None:
        try:
            await self.send_command(Command.QUIT)
        except (ConnectionError, OSError):
            pass
        self.close()


__all__ = ["Handshake", "MysqlClient", "ResultSet", "ServerError", "parse_handshake"]
