"""A flashback plan as SQL: per inverse transaction `BEGIN; …; COMMIT;`, each statement keyed by
the primary key. A DELETE or UPDATE also names the whole row it expects (every column but FLOAT
and DOUBLE, whose text need not compare equal): a row changed between the plan and the apply is
left alone, never overwritten (the apply counts such statements as late conflicts)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal

from cdc.binlog.constants import ColumnType
from cdc.binlog.row_image import Date, DateTime, Timestamp

from .flashback import Plan, RowChange, TableShape, Txn

_INEXACT = {ColumnType.FLOAT, ColumnType.DOUBLE}
_PRINTABLE = frozenset(range(0x20, 0x7F)) - {ord("'"), ord("\\")}


def literal(value: object) -> str:
    """A value decoded from a row image (`cdc.binlog.row_image`) as an SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes | bytearray):
        if all(b in _PRINTABLE for b in value):
            return "'" + value.decode() + "'"  # no quote, no backslash: the same in any sql_mode
        return f"X'{bytes(value).hex()}'" if value else "''"
    if isinstance(value, Timestamp):
        if value.seconds == 0 and value.microsecond == 0:
            return "'0000-00-00 00:00:00'"
        return f"FROM_UNIXTIME({value.seconds}.{value.microsecond:06d})"
    if isinstance(value, DateTime):
        return (
            f"'{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:"
            f"{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}'"
        )
    if isinstance(value, Date):
        return f"'{value.year:04d}-{value.month:02d}-{value.day:02d}'"
    if isinstance(value, dt.timedelta):
        sign = "-" if value < dt.timedelta(0) else ""
        us = abs(value) // dt.timedelta(microseconds=1)
        seconds, micro = divmod(us, 1_000_000)
        return (
            f"'{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micro:06d}'"
        )
    raise TypeError(f"no SQL literal for {type(value).__name__} {value!r}")


def _name(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


def _equal(shape: TableShape, row: list, positions) -> str:
    names = shape.names
    return " AND ".join(
        f"{_name(names[i])} IS NULL" if row[i] is None else f"{_name(names[i])} = {literal(row[i])}"
        for i in positions
    )


def _guard(shape: TableShape, row: list) -> str:
    """The key first (the CN routes by it), then every other comparable column."""
    rest = [
        i
        for i in range(len(shape.columns))
        if i not in shape.key and shape.columns[i].type not in _INEXACT
    ]
    return _equal(shape, row, [*shape.key, *rest])


def _same(shape: TableShape, row: list) -> str:
    """An assignment that changes nothing, for an image pair without a difference."""
    i = next((i for i in range(len(row)) if i not in shape.key), shape.key[0])
    return f"{_name(shape.names[i])} = {literal(row[i])}"


def statement(shape: TableShape, change: RowChange) -> str:
    """One inverse change (already inverted: a write inserts `after`, a delete removes
    `before`, an update turns `before` into `after`)."""
    table = f"{_name(shape.db)}.{_name(shape.name)}"
    if change.kind == "write":
        cols = ", ".join(_name(n) for n in shape.names)
        values = ", ".join(literal(v) for v in change.after)
        return f"INSERT INTO {table} ({cols}) VALUES ({values})"
    if change.kind == "delete":
        return f"DELETE FROM {table} WHERE {_guard(shape, change.before)}"
    # Only the columns the inverse changes: an unchanged key is not assigned (a CN routes an
    # UPDATE that assigns its shard key as a move between partitions).
    sets = ", ".join(
        f"{_name(n)} = {literal(new)}"
        for n, old, new in zip(shape.names, change.before, change.after, strict=True)
        if old != new
    ) or _same(shape, change.after)
    return f"UPDATE {table} SET {sets} WHERE {_guard(shape, change.before)}"


def statements(txn: Txn) -> list[str]:
    return [statement(c.shape, r) for c in txn.changes for r in c.rows]


def script(plan: Plan) -> Iterator[str]:
    """The whole plan as lines of a script `mariadb` runs."""
    yield (
        f"-- flashback of ({plan.start}, {plan.end}]: {len(plan.undo)} transactions, "
        f"{plan.rows} rows, newest first"
    )
    for conflict in plan.conflicts:
        yield f"-- conflict, {'undone anyway (--force)' if plan.forced else 'skipped'}: {conflict}"
    for txn in plan.undo:
        yield f"-- undoes the transaction at {txn}"
        yield "BEGIN;"
        for sql in statements(txn):
            yield sql + ";"
        yield "COMMIT;"
