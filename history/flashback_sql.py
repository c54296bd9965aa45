"""A flashback plan as SQL: per inverse transaction `BEGIN; …; COMMIT;`, each statement keyed by
the primary key. A DELETE or UPDATE also names the whole row it expects (every column but FLOAT
and DOUBLE, whose text need not compare equal): a row changed between the plan and the apply is
left alone, never overwritten (the apply counts such statements as late conflicts)."""

from __future__ import annotations

from collections.abc import Iterator

from cdc.binlog.constants import ColumnType
from cdc.sql_literal import BytesAs, sql_identifier, sql_literal

from .flashback import Plan, RowChange, TableShape, Txn

_INEXACT = {ColumnType.FLOAT, ColumnType.DOUBLE}


def literal(value: object) -> str:
    """A value decoded from a row image (`cdc.binlog.row_image`) as an SQL literal that any
    sql_mode reads the same (the script may run under NO_BACKSLASH_ESCAPES): strings are the
    row image's bytes, plain ASCII quoted and the rest in hex."""
    return sql_literal(value, bytes_as=BytesAs.PLAIN_OR_HEX)


def _equal(shape: TableShape, row: list, positions) -> str:
    names = shape.names
    return " AND ".join(
        f"{sql_identifier(names[i])} IS NULL"
        if row[i] is None
        else f"{sql_identifier(names[i])} = {literal(row[i])}"
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
    return f"{sql_identifier(shape.names[i])} = {literal(row[i])}"


def statement(shape: TableShape, change: RowChange) -> str:
    """One inverse change (already inverted: a write inserts `after`, a delete removes
    `before`, an update turns `before` into `after`)."""
    table = f"{sql_identifier(shape.db)}.{sql_identifier(shape.name)}"
    if change.kind == "write":
        cols = ", ".join(sql_identifier(n) for n in shape.names)
        values = ", ".join(literal(v) for v in change.after)
        return f"INSERT INTO {table} ({cols}) VALUES ({values})"
    if change.kind == "delete":
        return f"DELETE FROM {table} WHERE {_guard(shape, change.before)}"
    # Only the columns the inverse changes: an unchanged key is not assigned (a CN routes an
    # UPDATE that assigns its shard key as a move between partitions).
    sets = ", ".join(
        f"{sql_identifier(n)} = {literal(new)}"
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
