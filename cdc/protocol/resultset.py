"""Server-side result sets: column definitions (protocol 41), text rows (COM_QUERY) and binary
rows (COM_STMT_EXECUTE), and the framing of a whole result set with classic EOF packets or, for
CLIENT_DEPRECATE_EOF clients, a final OK."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cdc.protocol.constants import ColumnType, Status
from cdc.protocol.packets import eof_packet, lenenc_int, lenenc_str, ok_packet

BINARY_CHARSET = 63
UTF8_GENERAL_CI = 33
NOT_NULL_FLAG = 0x0001
UNSIGNED_FLAG = 0x0020
BINARY_FLAG = 0x0080
NUM_FLAG = 0x8000

_NUMERIC = {
    ColumnType.TINY,
    ColumnType.SHORT,
    ColumnType.LONG,
    ColumnType.LONGLONG,
    ColumnType.INT24,
    ColumnType.DECIMAL,
    ColumnType.NEWDECIMAL,
    ColumnType.FLOAT,
    ColumnType.DOUBLE,
}


@dataclass(slots=True, frozen=True)
class Column:
    """One result column; `type` decides how drivers convert values (pymysql: LONGLONG -> int)."""

    name: str
    type: ColumnType = ColumnType.VAR_STRING
    length: int = 255
    flags: int = 0
    decimals: int = 0
    table: str = ""
    schema: str = ""

    def encode(self) -> bytes:
        numeric = self.type in _NUMERIC
        charset = BINARY_CHARSET if numeric else UTF8_GENERAL_CI
        flags = self.flags | (NUM_FLAG | BINARY_FLAG if numeric else 0)
        length = 21 if numeric and self.length == 255 else self.length
        return (
            lenenc_str(b"def")
            + lenenc_str(self.schema)
            + lenenc_str(self.table)
            + lenenc_str(self.table)
            + lenenc_str(self.name)
            + lenenc_str(self.name)
            + b"\x0c"
            + struct.pack("<HIBHBxx", charset, length, self.type, flags, self.decimals)
        )


def text_row(values: Sequence[object]) -> bytes:
    """One text-protocol row; None is NULL (0xFB), everything else is sent as its str()."""
    out = bytearray()
    for value in values:
        if value is None:
            out += b"\xfb"
        elif isinstance(value, bytes | bytearray):
            out += lenenc_str(bytes(value))
        else:
            out += lenenc_str(str(value))
    return bytes(out)


# Binary-protocol encodings (struct codes, signed) of the fixed-size column types, for values in
# binary rows and COM_STMT_EXECUTE parameters alike; every other type is a length-encoded string.
BINARY_FIXED = {
    ColumnType.TINY: "b",
    ColumnType.SHORT: "h",
    ColumnType.YEAR: "h",
    ColumnType.LONG: "i",
    ColumnType.INT24: "i",
    ColumnType.LONGLONG: "q",
    ColumnType.FLOAT: "f",
    ColumnType.DOUBLE: "d",
}


def binary_row(columns: Sequence[Column], values: Sequence[object]) -> bytes:
    """One binary-protocol row: 0x00, the NULL bitmap (offset 2), then each non-NULL value."""
    nulls = bytearray((len(columns) + 9) // 8)
    out = bytearray()
    for i, (column, value) in enumerate(zip(columns, values, strict=True)):
        if value is None:
            nulls[(i + 2) // 8] |= 1 << ((i + 2) % 8)
            continue
        fixed = BINARY_FIXED.get(column.type)
        if fixed is not None:
            if fixed not in "fd" and column.flags & UNSIGNED_FLAG:
                fixed = fixed.upper()
            out += struct.pack("<" + fixed, float(value) if fixed in "fd" else int(value))
        elif isinstance(value, bytes | bytearray):
            out += lenenc_str(bytes(value))
        else:
            out += lenenc_str(str(value))
    return b"\x00" + bytes(nulls) + bytes(out)


def result_set_packets(
    columns: Sequence[Column],
    rows: Sequence[Sequence[object]],
    *,
    deprecate_eof: bool,
    status: int = Status.AUTOCOMMIT,
    binary: bool = False,
) -> list[bytes]:
    """Payloads of a complete result set (the caller frames them with consecutive seq ids),
    rows in the binary protocol for COM_STMT_EXECUTE. `status` goes into the terminating
    packet; set MORE_RESULTS_EXISTS there for multi-results."""
    out = [lenenc_int(len(columns))]
    out.extend(c.encode() for c in columns)
    if not deprecate_eof:
        out.append(eof_packet(status=status & ~Status.MORE_RESULTS_EXISTS))
    out.extend(binary_row(columns, r) if binary else text_row(r) for r in rows)
    if deprecate_eof:
        out.append(ok_packet(status=status, header=0xFE))
    else:
        out.append(eof_packet(status=status))
    return out


__all__ = ["BINARY_FIXED", "Column", "binary_row", "result_set_packets", "text_row"]
