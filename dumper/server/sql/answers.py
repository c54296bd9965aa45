"""What the answers of every subject share: their base (the server's context and the session's
state) and result columns (unsigned BIGINT ones, text ones, a SELECT's typed by value)."""

from __future__ import annotations

from cdc.protocol.constants import ColumnType
from cdc.protocol.resultset import UNSIGNED_FLAG, Column
from dumper.server.context import ServerContext, SessionState

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


class Answers:
    """The answers of one subject to one session's statements (`executor.py` tables them)."""

    def __init__(self, ctx: ServerContext, state: SessionState) -> None:
        self.ctx = ctx
        self.state = state
