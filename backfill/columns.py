"""Column types of a logical table: their Arrow type in the output, and how a value decoded from
a binlog row image (slow-path codec) becomes the value a `SELECT` through PyMySQL returns, so
rows read from the DNs and rows taken from the binlog compare and store alike."""

from __future__ import annotations

import datetime as dt
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from backfill.errors import BackfillError

if TYPE_CHECKING:  # Spark tasks import this module: no codec import at run time
    from cdc.binlog.row_image import Date, DateTime, Timestamp

INT_BYTES = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "integer": 4, "bigint": 8}
TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json", "enum", "set"}
BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit"}
GEOMETRY = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring"}
PYTHON_CODECS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "cp1252"}
FLOAT32 = struct.Struct("<f")


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One column as `information_schema.COLUMNS` describes it (the CN's logical schema)."""

    name: str
    type: str  # COLUMN_TYPE, e.g. "bigint(20) unsigned", "enum('new','paid')", "decimal(12,2)"
    charset: str | None = None

    @property
    def base(self) -> str:
        return re.match(r"[a-z]+", self.type.lower()).group(0)

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.type.lower()

    def args(self) -> list[str]:
        m = re.search(r"\((.*)\)", self.type)
        return [a.strip() for a in m.group(1).split(",")] if m else []

    def labels(self) -> list[str]:
        """ENUM/SET labels in declaration order."""
        m = re.search(r"\((.*)\)", self.type, re.DOTALL)
        return [s.replace("''", "'") for s in re.findall(r"'((?:[^']|'')*)'", m.group(1))]


def arrow_type(col: ColumnSpec, where: str) -> pa.DataType:
    base = col.base
    if base in INT_BYTES:
        return pa.uint64() if base == "bigint" and col.unsigned else pa.int64()
    if base in ("decimal", "numeric"):
        precision, scale = (int(a) for a in (col.args() + ["0", "0"])[:2])
        return (pa.decimal128 if precision <= 38 else pa.decimal256)(precision, scale)
    if base in ("float", "double", "real"):
        return pa.float64()
    if base in TEXT:
        return pa.string()
    if base in BINARY or base in GEOMETRY:
        return pa.binary()
    if base == "date":
        return pa.date32()
    if base == "datetime":
        return pa.timestamp("us")
    if base == "timestamp":
        return pa.timestamp("us", tz="UTC")  # read and loaded with time_zone='+00:00'
    if base == "time":
        return pa.duration("us")
    if base == "year":
        return pa.int64()
    raise BackfillError(f"{where}.{col.name}: column type {col.type!r} is not supported")


def arrow_schema(columns: list[ColumnSpec], where: str) -> pa.Schema:
    return pa.schema([pa.field(c.name, arrow_type(c, where)) for c in columns])


def stored_type(col: ColumnSpec, where: str) -> pa.DataType:
    """The type the column has in the written parts (Spark reads them for CSV and consumers may
    use Spark, which has no unsigned 64-bit integer and no TIME); `dataset.read_part` casts
    back to `arrow_type`."""
    if col.base == "bigint" and col.unsigned:
        return pa.decimal128(20, 0)
    if col.base == "time":
        return pa.int64()  # microseconds, negative allowed
    return arrow_type(col, where)


def stored_schema(columns: list[ColumnSpec], where: str) -> pa.Schema:
    return pa.schema([pa.field(c.name, stored_type(c, where)) for c in columns])


def _float32(value: float) -> float:
    """The shortest decimal that is the same float32: what the server prints for a FLOAT."""
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if FLOAT32.unpack(FLOAT32.pack(float(text)))[0] == value:
            return float(text)
    return value


def binlog_converter(col: ColumnSpec, where: str) -> Callable[[Any], Any]:
    """value decoded by cdc.binlog.row_image → the value PyMySQL returns for the same cell."""
    base = col.base
    if base in INT_BYTES:
        wrap = 1 << (8 * INT_BYTES[base])
        if col.unsigned:  # TABLE_MAP signedness may be absent: fix the sign from the schema
            return lambda v: v + wrap if v < 0 else v
        return int
    if base == "float":
        return _float32
    if base in ("double", "real"):
        return float
    if base in ("decimal", "numeric"):
        return Decimal
    if base in ("enum", "set"):
        labels = col.labels()
        if base == "enum":
            return lambda v: labels[v - 1] if 0 < v <= len(labels) else ""
        return lambda v: ",".join(label for i, label in enumerate(labels) if v >> i & 1)
    if base in TEXT:
        codec = PYTHON_CODECS.get((col.charset or "utf8mb4").lower(), col.charset or "utf-8")
        if base == "char":  # the server strips CHAR padding on SELECT
            return lambda v: bytes(v).decode(codec).rstrip(" ")
        return lambda v: bytes(v).decode(codec)
    if base == "bit":
        width = (int((col.args() or ["1"])[0]) + 7) // 8
        return lambda v: int(v).to_bytes(width, "big")
    if base == "binary":
        width = int((col.args() or ["1"])[0])
        return lambda v: bytes(v).ljust(width, b"\0")  # the binlog drops BINARY's zero padding
    if base in BINARY or base in GEOMETRY:
        return bytes
    if base == "date":
        return _date
    if base == "datetime":
        return _datetime
    if base == "timestamp":
        return _timestamp
    if base in ("time", "year"):
        return lambda v: v
    raise BackfillError(f"{where}.{col.name}: column type {col.type!r} is not supported")


def _date(v: Date) -> dt.date | str:
    try:
        return dt.date(v.year, v.month, v.day)
    except ValueError:  # 0000-00-00 and friends: PyMySQL hands back the text too
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"


def _datetime(v: DateTime) -> dt.datetime | str:
    try:
        return dt.datetime(*v)
    except ValueError:
        return f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"


def _timestamp(v: Timestamp) -> dt.datetime | str:
    if v.seconds == 0 and v.microsecond == 0:
        return "0000-00-00 00:00:00"
    return dt.datetime(1970, 1, 1) + dt.timedelta(seconds=v.seconds, microseconds=v.microsecond)


def row_converter(columns: list[ColumnSpec], where: str) -> Callable[[list], tuple]:
    convs = [binlog_converter(c, where) for c in columns]

    def convert(values: list) -> tuple:
        return tuple(None if v is None else f(v) for f, v in zip(convs, values, strict=True))

    return convert


def key_value(value: Any) -> Any:
    """Keys compare alike whichever side they come from (Arrow hands back aware UTC datetimes)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value
