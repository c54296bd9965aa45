"""Binary-protocol rows (COM_STMT_EXECUTE, COM_STMT_FETCH) made from text rows, as MariaDB's
Protocol_binary stores each type (sql/protocol.cc): integers and YEAR little-endian at their
width (unsigned by the column's flag), FLOAT and DOUBLE as IEEE values, DATE/DATETIME/TIMESTAMP
and TIME in their 0/4/7/11 and 0/8/12-byte forms, every other type (DECIMAL, strings, BLOB, BIT,
ENUM/SET) as the same length-encoded bytes as in a text row. Rows read from the DNs arrive as
text rows (snapshot reads pass them through); converting them here keeps one read path for both
protocols. `open_binary` gives any result's rows so, for EXECUTE to stream or a cursor to hold."""

from __future__ import annotations

import contextlib
import datetime as _dt
import struct
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cdc.protocol.constants import ColumnType as T
from cdc.protocol.resultset import binary_row
from dumper.server.handlers import ColumnPacket, RowsResult, SqlError, StreamedRows

UNSIGNED_FLAG = 0x0020
NULL = 0xFB
_INT = {T.TINY: "b", T.SHORT: "h", T.YEAR: "h", T.INT24: "i", T.LONG: "i", T.LONGLONG: "q"}
_DATE = struct.Struct("<BHBB")
_DATETIME = struct.Struct("<BHBBBBB")
_DATETIME_US = struct.Struct("<BHBBBBBI")
_TIME = struct.Struct("<BBIBBB")
_TIME_US = struct.Struct("<BBIBBBI")


class TypedColumn(Protocol):
    @property
    def type(self) -> int: ...

    @property
    def flags(self) -> int: ...


def _micro(fraction: bytes) -> int:
    return int(fraction[:6].ljust(6, b"0")) if fraction else 0


def date(text: bytes) -> bytes:
    try:  # the C parser first: a third of the slices' cost
        v = _dt.date.fromisoformat(text.decode())
    except ValueError:  # the zero date, or a zero month or day
        y, mo, d = int(text[0:4]), int(text[5:7]), int(text[8:10])
        return _DATE.pack(4, y, mo, d) if y or mo or d else b"\x00"
    return _DATE.pack(4, v.year, v.month, v.day)


def datetime(text: bytes) -> bytes:
    """`YYYY-MM-DD hh:mm:ss[.ffffff]`: 11 bytes with microseconds, 7 with a time, 4 with a
    date, 0 for the zero date (store(MYSQL_TIME*) picks the shortest)."""
    try:
        v = _dt.datetime.fromisoformat(text.decode())
        y, mo, d, h, mi, s, us = v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond
    except ValueError:  # the zero date, or a zero month or day
        y, mo, d = int(text[0:4]), int(text[5:7]), int(text[8:10])
        h, mi, s = int(text[11:13] or 0), int(text[14:16] or 0), int(text[17:19] or 0)
        us = _micro(text[20:])
    if us:
        return _DATETIME_US.pack(11, y, mo, d, h, mi, s, us)
    if h or mi or s:
        return _DATETIME.pack(7, y, mo, d, h, mi, s)
    return _DATE.pack(4, y, mo, d) if y or mo or d else b"\x00"


def time(text: bytes) -> bytes:
    """`[-]hhh:mm:ss[.ffffff]`: sign, days, hours below 24, minutes, seconds (store_time)."""
    neg = text[:1] == b"-"
    clock, _, fraction = text[neg:].partition(b".")
    hours, minutes, seconds = (int(p) for p in clock.split(b":"))
    days, hours = divmod(hours, 24)
    us = _micro(fraction)
    if us:
        return _TIME_US.pack(12, neg, days, hours, minutes, seconds, us)
    if days or hours or minutes or seconds:
        return _TIME.pack(8, neg, days, hours, minutes, seconds)
    return b"\x00"


def _converter(column: TypedColumn) -> Callable[[bytes], bytes] | None:
    """How one column's text value becomes its binary value; None: the same length-encoded
    bytes."""
    t = column.type
    if t in _INT:
        code = _INT[t].upper() if column.flags & UNSIGNED_FLAG else _INT[t]
        pack = struct.Struct("<" + code).pack
        return lambda text: pack(int(text))
    if t == T.FLOAT:
        pack_f = struct.Struct("<f").pack
        return lambda text: pack_f(float(text))
    if t == T.DOUBLE:
        pack_d = struct.Struct("<d").pack
        return lambda text: pack_d(float(text))
    if t == T.DATE:
        return date
    if t in (T.DATETIME, T.TIMESTAMP):
        return datetime
    if t == T.TIME:
        return time
    return None


class BinaryRows:
    """Text rows of `columns` to binary rows: 0x00, the NULL bitmap (bits from offset 2), then
    each value that is not NULL."""

    def __init__(self, columns: Sequence[TypedColumn]) -> None:
        self._convert = [_converter(c) for c in columns]
        self._null_bytes = (len(columns) + 9) // 8

    def __call__(self, row: bytes) -> bytes:
        nulls = bytearray(self._null_bytes)
        out: list[bytes] = [b"\x00", b""]
        pos = 0
        for i, convert in enumerate(self._convert):
            first = row[pos]
            if first < NULL:
                start = pos + 1
                end = start + first
            elif first == NULL:
                nulls[(i + 2) >> 3] |= 1 << ((i + 2) & 7)
                pos += 1
                continue
            else:
                width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
                start = pos + 1 + width
                end = start + int.from_bytes(row[pos + 1 : start], "little")
            out.append(row[pos:end] if convert is None else convert(row[start:end]))
            pos = end
        out[1] = bytes(nulls)
        return b"".join(out)


@dataclass(slots=True)
class OpenRows:
    """A result's binary rows being sent (or held in a cursor): `rows` yields row payloads (None
    for work that made no row); `close()` ends the read, read to the end or not."""

    columns: Sequence[ColumnPacket]
    rows: AsyncIterator[bytes | None]
    release: Callable[[], None]

    async def close(self) -> None:
        with contextlib.suppress(SqlError):
            await self.rows.aclose()  # type: ignore[attr-defined]
        self.release()


async def open_binary(result: RowsResult | StreamedRows) -> OpenRows:
    """The columns of `result` and its rows in the binary protocol; SqlError when the read
    cannot start."""
    if isinstance(result, RowsResult):
        return OpenRows(result.columns, _listed(result), lambda: None)
    stream = result.stream
    try:
        columns = await stream.open(binary=True)
    except BaseException:
        stream.close()
        raise
    return OpenRows(columns, _streamed(stream.rows(), BinaryRows(columns)), stream.close)


async def _listed(result: RowsResult) -> AsyncIterator[bytes | None]:
    columns = result.columns
    for row in result.rows:
        yield None if row is None else binary_row(columns, row)


async def _streamed(
    batches: AsyncIterator[list[bytes]], convert: BinaryRows
) -> AsyncIterator[bytes | None]:
    async with contextlib.aclosing(batches):  # type: ignore[type-var]
        async for rows in batches:
            for row in rows:
                yield convert(row)
