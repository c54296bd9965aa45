"""Statement text with its parameters substituted, as the CN sends it (pymysql's `%s` style)."""

from __future__ import annotations

from collections.abc import Sequence

from cdc.cn_protocol.errors import RoutingError
from cdc.sql_literal import LiteralError, sql_literal


def literal(value: object) -> str:
    """A parameter as the CN spells it for a DN: the one renderer, bytes as X'..' (any byte
    survives utf8mb4); a value without a literal is a RoutingError."""
    try:
        return sql_literal(value)
    except LiteralError:
        raise RoutingError(
            f"cannot pass a {type(value).__name__} as an SQL parameter: {value!r}"
        ) from None


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
