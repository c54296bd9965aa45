"""The one spelling of a Python value as an SQL literal, for every statement text we write: the
CN's statements to the DNs (`cdc.cn_protocol.sql`), WHERE pushed down by snapshot reads
(`read_path.where`), flashback's inverse SQL (`history.flashback_sql`) and prepared statements'
parameters bound into the text our own parser reads (`dumper.server.wire.prepared`).

Strings are escaped as mysql_real_escape_string does (\\ ' " NUL LF CR ^Z with a backslash), which
MariaDB and our own lexer read back to the same text. Bytes are spelled one of two ways, a choice
the caller names (`BytesAs`): always X'..' (any byte survives any connection charset), or, where
the text must read the same in any sql_mode (NO_BACKSLASH_ESCAPES included), printable ASCII
without a quote or backslash as a plain string and anything else in hex. A caller whose reader
knows no X'..' (our own parser) converts its bytes to str first. Date and time values carry a
fraction only when it is not zero; a negative TIME is the sign before the whole magnitude."""

from __future__ import annotations

import datetime as dt
import enum
import math
from decimal import Decimal

from cdc.binlog.row_image import Date, DateTime, Timestamp

# mysql_real_escape_string's set (PyMySQL's escape_string is the same).
_ESCAPES = str.maketrans(
    {"\\": "\\\\", "'": "\\'", '"': '\\"', "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}
)
_PLAIN = frozenset(range(0x20, 0x7F)) - {ord("'"), ord("\\")}


def sql_identifier(name: str) -> str:
    """A name (database, table, column) as MariaDB quotes it: in backticks, a backtick doubled,
    whatever else the name holds."""
    return "`" + name.replace("`", "``") + "`"


class LiteralError(ValueError):
    """A value with no SQL literal: an unknown type, or a float or Decimal that is not finite."""


class BytesAs(enum.Enum):
    HEX = "hex"  # X'..' always (X'' when empty)
    PLAIN_OR_HEX = "plain or hex"  # 'text' for printable ASCII without ' or \ ('' when empty)


def sql_literal(value: object, *, bytes_as: BytesAs = BytesAs.HEX) -> str:
    """`value` as an SQL literal. Raises LiteralError for a value that has none."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float | Decimal):
        if not (math.isfinite(value) if isinstance(value, float) else value.is_finite()):
            raise LiteralError(f"no SQL literal for {value!r}")
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return "'" + value.translate(_ESCAPES) + "'"
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        if bytes_as is BytesAs.PLAIN_OR_HEX and all(b in _PLAIN for b in data):
            return "'" + data.decode("ascii") + "'"
        return "X'" + data.hex() + "'"
    if isinstance(value, Timestamp):
        # The codec's TIMESTAMP is an instant: the same in any session time zone.
        if value.seconds == 0 and value.microsecond == 0:
            return "'0000-00-00 00:00:00'"
        return f"FROM_UNIXTIME({value.seconds}.{value.microsecond:06d})"
    if isinstance(value, dt.datetime | DateTime):
        clock = _clock(value.hour, value.minute, value.second, value.microsecond)
        return f"'{_date(value)} {clock}'"
    if isinstance(value, dt.date | Date):
        return "'" + _date(value) + "'"
    if isinstance(value, dt.time):
        return "'" + _clock(value.hour, value.minute, value.second, value.microsecond) + "'"
    if isinstance(value, dt.timedelta):
        sign = "-" if value < dt.timedelta(0) else ""
        seconds, micro = divmod(abs(value) // dt.timedelta(microseconds=1), 1_000_000)
        return f"'{sign}{_clock(seconds // 3600, seconds // 60 % 60, seconds % 60, micro)}'"
    if isinstance(value, set | frozenset):
        return sql_literal(",".join(sorted(str(v) for v in value)))  # a SET column's text
    raise LiteralError(f"no SQL literal for a {type(value).__name__}: {value!r}")


def _date(value: dt.date | Date | DateTime) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _clock(hours: int, minutes: int, seconds: int, micro: int) -> str:
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{text}.{micro:06d}" if micro else text
