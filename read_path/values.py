"""Pure: result columns and text rows of snapshot reads. Column definitions are the DN's own
packets with the physical database and table renamed (`ColumnDef`); rows read from the DNs pass
through as text rows; only the before-images from the global binlog are spelled here
(`text_value`), as the text protocol spells each type."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal

from cdc.binlog.row_image import Date, DateTime, Timestamp
from cdc.protocol.constants import ColumnType
from cdc.protocol.packets import lenenc_int, lenenc_str, read_lenenc_str
from read_path.collation import (
    Collation,
    collation,
    latin1_as_utf8,
    of_id,
    single_byte,
)

T = ColumnType
UNSIGNED_FLAG = 0x0020
ENUM_FLAG = 0x0100
SET_FLAG = 0x0800
BINARY_CHARSET = 63
INTEGER_TYPES = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG})
_INT_BITS = {T.TINY: 8, T.SHORT: 16, T.INT24: 24, T.LONG: 32, T.LONGLONG: 64}
NUMERIC_TYPES = INTEGER_TYPES | {T.DECIMAL, T.NEWDECIMAL, T.FLOAT, T.DOUBLE, T.YEAR}
_FIXED = struct.Struct("<BHIBHB")  # 0x0c, charset, length, type, flags, decimals
MAX_DECPT_F = 15  # my_gcvt's MAX_DECPT_FOR_F_FORMAT (DBL_DIG)


@dataclass(slots=True, frozen=True)
class ColumnDef:
    """One column definition packet (protocol 41), decoded enough to rename and to read."""

    schema: bytes
    table: bytes
    org_table: bytes
    name: bytes
    org_name: bytes
    charset: int
    length: int
    type: int
    flags: int
    decimals: int
    tail: bytes  # filler (and anything a newer server appends)
    # The column's collation as the table declares it (SHOW FULL COLUMNS); a result set's
    # packet names the connection's instead. None: not known, the packet's is used.
    declared: str | None = None

    @classmethod
    def parse(cls, packet: bytes) -> ColumnDef:
        pos, fields = 0, []
        for _ in range(6):  # catalog, schema, table, org_table, name, org_name
            value, pos = read_lenenc_str(packet, pos)
            fields.append(value or b"")
        _len, charset, length, type_, flags, decimals = _FIXED.unpack_from(packet, pos)
        return cls(
            *fields[1:], charset, length, type_, flags, decimals, packet[pos + _FIXED.size :]
        )

    def renamed(self, db: str, table: str, alias: str) -> ColumnDef:
        """As the logical table's: a column of a table names it, an expression (empty names)
        stays empty."""
        if not self.org_table and not self.table:
            return self
        return replace(self, schema=db.encode(), table=alias.encode(), org_table=table.encode())

    def encode(self) -> bytes:
        return (
            lenenc_str(b"def")
            + lenenc_str(self.schema)
            + lenenc_str(self.table)
            + lenenc_str(self.org_table)
            + lenenc_str(self.name)
            + lenenc_str(self.org_name)
            + _FIXED.pack(0x0C, self.charset, self.length, self.type, self.flags, self.decimals)
            + self.tail
        )

    @property
    def unsigned(self) -> bool:
        return bool(self.flags & UNSIGNED_FLAG)

    @property
    def numeric(self) -> bool:
        return self.type in NUMERIC_TYPES

    @property
    def collation(self) -> Collation:
        return of_id(self.charset) if self.declared is None else collation(self.declared)


def split_fields(row: bytes, count: int) -> tuple[list[bytes | None], int]:
    """The first `count` fields of a text row, and where the rest starts."""
    pos, out = 0, []
    for _ in range(count):
        value, pos = read_lenenc_str(row, pos)
        out.append(value)
    return out, pos


def text_row(fields: list[bytes | None]) -> bytes:
    return b"".join(b"\xfb" if f is None else lenenc_int(len(f)) + f for f in fields)


def integer(col: ColumnDef, value: int) -> int:
    """A binlog integer as the column holds it: without table-map metadata the codec reads
    integers as signed, so an unsigned column's large values come negative."""
    if value < 0 and col.unsigned and col.type in _INT_BITS:
        return value + (1 << _INT_BITS[col.type])
    return value


def text_value(
    col: ColumnDef, value: object, members: tuple[str, ...] = (), exact_float: bool = False
) -> bytes | None:
    """`value` decoded from a rows event (`cdc.binlog.row_image`), as the text protocol sends
    it for `col`. `members`: an ENUM's or SET's values in order (SHOW COLUMNS). `exact_float`:
    a FLOAT with the digits that give back its every bit (a binary-protocol read, whose pages
    read FLOATs as DOUBLEs: `read.py`), not the 6 the text protocol prints."""
    if value is None:
        return None
    t = col.type
    if col.flags & ENUM_FLAG and isinstance(value, int):
        return members[value - 1].encode() if 0 < value <= len(members) else b""
    if col.flags & SET_FLAG and isinstance(value, int):
        return ",".join(m for i, m in enumerate(members) if value >> i & 1).encode()
    if t in INTEGER_TYPES:
        return str(integer(col, int(value))).encode()  # type: ignore[call-overload]
    if t == T.YEAR:
        return b"%04d" % value if value else b"0000"
    if t == T.FLOAT:
        return _real_text(float(value), 8 if exact_float else 4)  # type: ignore[arg-type]
    if t == T.DOUBLE:
        return _real_text(float(value), 8)  # type: ignore[arg-type]
    if t in (T.DECIMAL, T.NEWDECIMAL):
        return format(Decimal(value), "f").encode()  # type: ignore[arg-type]
    if t == T.BIT and isinstance(value, int):
        return value.to_bytes((col.length + 7) // 8, "big")
    if isinstance(value, Date):
        return b"%04d-%02d-%02d" % value
    if isinstance(value, DateTime):
        return _datetime(value, col.decimals)
    if isinstance(value, Timestamp):
        if not value.seconds and not value.microsecond:
            return _datetime(DateTime(0, 0, 0), col.decimals)
        at = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=value.seconds)
        return _datetime(
            DateTime(at.year, at.month, at.day, at.hour, at.minute, at.second, value.microsecond),
            col.decimals,
        )
    if isinstance(value, dt.timedelta):
        return _time(value, col.decimals)
    if isinstance(value, bytes | bytearray | memoryview):
        # The DN sends a latin1 or ascii column's text in the readers' utf8mb4, as must this.
        declared = col.declared
        if declared is not None and single_byte(declared):
            return latin1_as_utf8(bytes(value))
        return bytes(value)
    return str(value).encode()


def _datetime(v: DateTime, decimals: int) -> bytes:
    text = b"%04d-%02d-%02d %02d:%02d:%02d" % tuple(v[:6])
    return text + _fraction(v.microsecond, decimals)


def _time(v: dt.timedelta, decimals: int) -> bytes:
    us = int(v / dt.timedelta(microseconds=1))
    sign = b"-" if us < 0 else b""
    us = abs(us)
    seconds, micro = divmod(us, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    return sign + b"%02d:%02d:%02d" % (hours, rest // 60, rest % 60) + _fraction(micro, decimals)


def _fraction(microsecond: int, decimals: int) -> bytes:
    if not 0 < decimals <= 6:
        return b""
    return b"." + (b"%06d" % microsecond)[:decimals]


def _real_text(value: float, width: int) -> bytes:
    """A FLOAT (`width` 4: rounded to 6 significant digits, FLT_DIG) or DOUBLE (8: the fewest
    digits that read back as the same value) as MariaDB prints it (my_gcvt): fixed notation,
    unless it needs more than 14 zeros after the point or zeros past the 15th digit before it,
    then `1.5e-20` / `1e16`; -0 as 0. Checked against MariaDB 10.11 over random values."""
    if value == 0:
        return b"0"
    sign = "-" if value < 0 else ""
    text = f"{abs(value):.5e}" if width == 4 else repr(abs(value))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    decpt = len(whole) + int(exponent or 0)  # digits before the point
    stripped = digits.lstrip("0")
    decpt -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    n = len(digits)
    if -MAX_DECPT_F < decpt <= 0:
        out = "0." + "0" * -decpt + digits
    elif 0 < decpt <= MAX_DECPT_F or 0 < decpt < n:
        out = digits[:decpt] + "." + digits[decpt:] if decpt < n else digits + "0" * (decpt - n)
    else:
        out = digits[0] + ("." + digits[1:] if n > 1 else "") + f"e{decpt - 1}"
    return (sign + out).encode()


def sort_key(col: ColumnDef, text: bytes) -> object:
    """A text value's order for ORDER BY and MIN/MAX: numbers by value, strings under the
    column's collation (`collation.py`; dates and times are binary: their bytes)."""
    if col.numeric and col.type != T.YEAR:
        return Decimal(text.decode())
    return col.collation.key(text)


def order_key(col: ColumnDef, members: tuple[str, ...]) -> Callable[[bytes], object]:
    """How ORDER BY orders a column's text values: an ENUM by its members' order (its index;
    '' is 0), a SET by its number (each member a bit), as MariaDB sorts them; any other as
    `sort_key` (MIN/MAX compare ENUMs and SETs as strings)."""
    if col.flags & ENUM_FLAG:
        index = {m.encode(): i + 1 for i, m in enumerate(members)}
        return lambda text: index.get(text, 0)
    if col.flags & SET_FLAG:
        bits = {m.encode(): 1 << i for i, m in enumerate(members)}
        return lambda text: sum(bits.get(part, 0) for part in text.split(b",") if part)
    return lambda text: sort_key(col, text)
