"""Result columns the answers share: unsigned BIGINT columns and plain text ones."""

from __future__ import annotations

from cdc.protocol.constants import ColumnType
from cdc.protocol.resultset import UNSIGNED_FLAG, Column

LONGLONG_U = {"type": ColumnType.LONGLONG, "flags": UNSIGNED_FLAG}


def cols(*names: str) -> list[Column]:
    return [Column(n) for n in names]


def value_column(name: str, value: object) -> Column:
    """A SELECT's column, typed by its value (integers and doubles as numbers)."""
    if isinstance(value, bool | int):
        return Column(name, ColumnType.LONGLONG)
    if isinstance(value, float):
        return Column(name, ColumnType.DOUBLE, decimals=31)
    return Column(name)
