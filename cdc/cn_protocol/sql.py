"""Statement text with its parameters substituted, as the CN sends it (pymysql's `%s` style)."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence

from pymysql.converters import escape_item, escape_string

from cdc.cn_protocol.errors import RoutingError


def literal(value: object) -> str:
    """A Python value as a MariaDB literal (bytes as X'..', so any byte survives utf8mb4)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, bytes | bytearray | memoryview):
        return "X'" + bytes(value).hex() + "'"
    if isinstance(value, str):
        return "'" + escape_string(value) + "'"
    if isinstance(value, int | float | decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time | datetime.timedelta):
        return escape_item(value, "utf8mb4")
    if isinstance(value, set | frozenset):
        return literal(",".join(sorted(str(v) for v in value)))
    raise RoutingError(f"cannot pass a {type(value).__name__} as an SQL parameter: {value!r}")


def render(sql: str, params: Sequence[object] | None) -> str:
    """Substitute `%s` placeholders like pymysql does (`%%` is a literal percent)."""
    if params is None:
        return sql
    if isinstance(params, dict):
        raise RoutingError("named parameters are not supported; use %s placeholders")
    try:
        return sql % tuple(literal(p) for p in params)
    except (TypeError, ValueError) as exc:
        raise RoutingError(
            f"parameters do not match the placeholders ({exc}): {sql[:200]}"
        ) from None
