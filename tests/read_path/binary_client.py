"""A raw client of server-side prepared statements (COM_STMT_PREPARE / EXECUTE / FETCH) that
keeps every packet as the server sent it, to compare the dumper's binary result sets with a
MariaDB's byte for byte."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import ColumnType as T
from cdc.protocol.packets import ERR, is_eof, lenenc_str, parse_err

COM_STMT_PREPARE = 0x16
COM_STMT_EXECUTE = 0x17
COM_STMT_FETCH = 0x1C
COM_STMT_CLOSE = 0x19
CURSOR_TYPE_READ_ONLY = 0x01
CURSOR_EXISTS = 0x0040
LAST_ROW_SENT = 0x0080


@dataclass(slots=True)
class Prepared:
    stmt_id: int
    params: int
    columns: list[bytes]  # the column definitions announced at PREPARE


@dataclass(slots=True)
class Result:
    columns: list[bytes]
    rows: list[bytes] = field(default_factory=list)
    status: int = 0  # of the packet that ended the metadata (cursor) or the rows


def status_of(packet: bytes) -> int:
    """The status flags of an EOF packet (this client does not ask for DEPRECATE_EOF)."""
    return struct.unpack_from("<H", packet, 3)[0]


def param(type_: int, value: object) -> tuple[int, bytes | None]:
    """A parameter as a client binds it: (type, its binary value or None for NULL)."""
    if value is None:
        return T.NULL, None
    if type_ == T.LONGLONG:
        return type_, struct.pack("<q", value)
    if type_ == T.LONG:
        return type_, struct.pack("<i", value)
    if type_ == T.TINY:
        return type_, struct.pack("<b", value)
    if type_ == T.DOUBLE:
        return type_, struct.pack("<d", value)
    if type_ == T.FLOAT:
        return type_, struct.pack("<f", value)
    if type_ in (T.DATE, T.DATETIME, T.TIMESTAMP, T.TIME):
        return type_, bytes([len(value)]) + value  # type: ignore[arg-type]
    return type_, lenenc_str(value if isinstance(value, bytes) else str(value).encode())


class BinaryClient:
    def __init__(self, client: MysqlClient) -> None:
        self.client = client

    @classmethod
    async def connect(cls, host: str, port: int, user: str, password: str) -> BinaryClient:
        client = await MysqlClient.connect(host, port, user, password)
        await client.query("SET time_zone = '+00:00'")
        return cls(client)

    def close(self) -> None:
        self.client.close()

    async def _packet(self) -> bytes:
        packet = await self.client.read_packet()
        if packet[0] == ERR:
            raise parse_err(packet)
        return packet

    async def prepare(self, sql: str) -> Prepared:
        await self.client.send_command(COM_STMT_PREPARE, sql.encode())
        first = await self._packet()
        stmt_id, ncols, nparams = struct.unpack_from("<IHH", first, 1)
        for _ in range(nparams):
            await self._packet()
        if nparams:
            assert is_eof(await self._packet())
        columns = [await self._packet() for _ in range(ncols)]
        if ncols:
            assert is_eof(await self._packet())
        return Prepared(stmt_id, nparams, columns)

    async def execute(
        self, stmt: Prepared, params: list[tuple[int, bytes | None]] = (), cursor: bool = False
    ) -> Result:
        n = len(params)
        nulls = 0
        for i, (_t, v) in enumerate(params):
            if v is None:
                nulls |= 1 << i
        body = struct.pack("<IBI", stmt.stmt_id, CURSOR_TYPE_READ_ONLY if cursor else 0, 1)
        if n:
            body += nulls.to_bytes((n + 7) // 8, "little") + b"\x01"
            body += b"".join(struct.pack("<BB", t, 0) for t, _v in params)
            body += b"".join(v for _t, v in params if v is not None)
        await self.client.send_command(COM_STMT_EXECUTE, body)
        first = await self._packet()
        count = first[0]
        columns = [await self._packet() for _ in range(count)]
        end = await self._packet()
        assert is_eof(end), end
        result = Result(columns, status=status_of(end))
        if not cursor:
            result.rows, result.status = await self._rows()
        return result

    async def fetch(self, stmt: Prepared, n: int) -> Result:
        await self.client.send_command(COM_STMT_FETCH, struct.pack("<II", stmt.stmt_id, n))
        rows, status = await self._rows()
        return Result([], rows, status)

    async def _rows(self) -> tuple[list[bytes], int]:
        rows = []
        while True:
            packet = await self._packet()
            if is_eof(packet):
                return rows, status_of(packet)
            rows.append(packet)

    async def close_statement(self, stmt: Prepared) -> None:
        await self.client.send_command(COM_STMT_CLOSE, struct.pack("<I", stmt.stmt_id))


_FIXED = {T.TINY: 1, T.SHORT: 2, T.YEAR: 2, T.INT24: 4, T.LONG: 4, T.LONGLONG: 8, T.FLOAT: 4}
_FIXED[T.DOUBLE] = 8


def fields(columns: list[bytes], row: bytes) -> dict[str, bytes | None]:
    """A binary row's values by column name, each as its bytes (to name what differs)."""
    from cdc.protocol.packets import read_lenenc_int
    from read_path.values import ColumnDef

    defs = [ColumnDef.parse(c) for c in columns]
    nulls = row[1 : 1 + (len(defs) + 9) // 8]
    pos = 1 + len(nulls)
    out: dict[str, bytes | None] = {}
    for i, col in enumerate(defs):
        name = col.name.decode()
        if nulls[(i + 2) // 8] >> ((i + 2) % 8) & 1:
            out[name] = None
            continue
        if col.type in _FIXED:
            end = pos + _FIXED[col.type]
        elif col.type in (T.DATE, T.DATETIME, T.TIMESTAMP, T.TIME):
            end = pos + 1 + row[pos]
        else:
            length, start = read_lenenc_int(row, pos)
            end = start + (length or 0)
        out[name] = row[pos:end]
        pos = end
    return out
