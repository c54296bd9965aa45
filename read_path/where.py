"""Pure: a SELECT's WHERE as SQL for the DN (pushed down with every page read), and its value
over a before-image from the global binlog (a key changed during the read is tested here: the
DN saw a later state). docs/snapshot-reads.md says why pushing it down stays exact.

Python's reading of a comparison: NULL makes it unknown (false at the top, as in SQL's three
values); numbers compare by value (a string literal against a number column is read as a
number, as MySQL converts it); other columns compare their text under the column's collation
(`collation.py`: the column's declared collation with MariaDB's weights, PAD SPACE or not; one
without exact weights is refused before the read)."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from cdc.sql_literal import sql_identifier, sql_literal
from read_path.request import (
    Between,
    BoolOp,
    Compare,
    InList,
    IsNull,
    Not,
    Where,
    WhereValue,
)
from read_path.values import ColumnDef

_NUMERIC_PREFIX = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def to_sql(where: Where) -> str:
    if isinstance(where, Compare):
        return f"{sql_identifier(where.column)} {where.op} {sql_literal(where.value)}"
    if isinstance(where, Between):
        neg = "NOT " if where.negated else ""
        low, high = sql_literal(where.low), sql_literal(where.high)
        return f"{sql_identifier(where.column)} {neg}BETWEEN {low} AND {high}"
    if isinstance(where, InList):
        neg = "NOT " if where.negated else ""
        values = ", ".join(sql_literal(v) for v in where.values)
        return f"{sql_identifier(where.column)} {neg}IN ({values})"
    if isinstance(where, IsNull):
        return f"{sql_identifier(where.column)} IS {'NOT ' if where.negated else ''}NULL"
    if isinstance(where, BoolOp):
        return "(" + f" {where.op} ".join(to_sql(p) for p in where.parts) + ")"
    return f"NOT ({to_sql(where.part)})"


def columns_of(where: Where) -> set[str]:
    if isinstance(where, BoolOp):
        return set().union(*(columns_of(p) for p in where.parts))
    if isinstance(where, Not):
        return columns_of(where.part)
    return {where.column}


# -- evaluation over a row's text values -----------------------------------------------------------
# A row as the evaluation reads it: column name → (definition, text value or None).
Lookup = Callable[[str], tuple[ColumnDef, bytes | None]]


def matches(where: Where | None, row: Lookup) -> bool:
    return where is None or _eval(where, row) is True


def _eval(where: Where, row: Lookup) -> bool | None:
    if isinstance(where, BoolOp):
        values = [_eval(p, row) for p in where.parts]
        if where.op == "AND":
            return False if False in values else (None if None in values else True)
        return True if True in values else (None if None in values else False)
    if isinstance(where, Not):
        inner = _eval(where.part, row)
        return None if inner is None else not inner
    col, text = row(where.column)
    if isinstance(where, IsNull):
        return (text is not None) if where.negated else (text is None)
    if text is None:
        return None
    if isinstance(where, Compare):
        c = _compare(col, text, where.value)
        if c is None:
            return None
        return {
            "=": c == 0,
            "<>": c != 0,
            "<": c < 0,
            "<=": c <= 0,
            ">": c > 0,
            ">=": c >= 0,
        }[where.op]
    if isinstance(where, Between):
        lo, hi = _compare(col, text, where.low), _compare(col, text, where.high)
        if lo is None or hi is None:
            return None
        return (lo >= 0 and hi <= 0) != where.negated
    found: bool | None = False
    for v in where.values:
        c = _compare(col, text, v)
        if c == 0:
            found = True
            break
        if c is None:
            found = None
    return found if found is None else found != where.negated


def _compare(col: ColumnDef, text: bytes, value: WhereValue) -> int | None:
    """-1, 0, 1 for the column's value against a literal; None when the literal is NULL."""
    if value is None:
        return None
    if col.numeric or not isinstance(value, str):
        a, b = _number(text), _number(value)
        if a is not None and b is not None:
            return (a > b) - (a < b)
    order = col.collation
    left = order.key(text)
    right = order.key(value if isinstance(value, str) else str(value))
    return (left > right) - (left < right)  # type: ignore[operator]


def _number(value: object) -> Decimal | None:
    """A value as MySQL reads it in a numeric comparison: a string by its longest numeric
    prefix ('12abc' is 12, 'abc' is 0)."""
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value)) if value == value and abs(value) != float("inf") else None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    m = _NUMERIC_PREFIX.match(str(value))
    try:
        return Decimal(m.group(0)) if m else Decimal(0)
    except InvalidOperation:
        return Decimal(0)
