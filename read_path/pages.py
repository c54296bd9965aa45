"""A shard's page as the read asks the DN for it (the SQL: the key and data columns after the
last key read, the WHERE pushed down, in key order), and the keys a page and a before-image
share: a before-image's decoded key values and a page's key texts both become the same key."""

from __future__ import annotations

from collections.abc import Callable

from cdc.protocol.constants import ColumnType as T
from cdc.sql_literal import sql_identifier
from read_path.chunks import Key
from read_path.plan import Plan
from read_path.request import TableSelect
from read_path.values import integer, text_value
from read_path.where import to_sql


def page_sql(plan: Plan, stmt: TableSelect, table: str, after: Key | None, rows: int) -> str:
    """The SELECT of the next `rows` rows of shard `table` after key `after` (None: its first)."""
    names = [sql_identifier(plan.columns[i].org_name.decode()) for i in plan.key]
    data = [_data_column(plan, i) for i in plan.data]
    conds = []
    if after is not None:
        conds.append(_after(names, after))
    if stmt.where is not None:
        conds.append(f"({to_sql(stmt.where)})")
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    return (
        f"SELECT {', '.join(names + data)} FROM {table}{where} "
        f"ORDER BY {', '.join(names)} LIMIT {rows}"
    )


def _after(names: list[str], key: Key) -> str:
    """`key` < (the columns), spelled as ranges the optimizer reads on the primary key:
    `a > x OR (a = x AND b > y)`."""
    ors = []
    for n in range(len(names)):
        eq = [f"{names[i]} = {key[i]}" for i in range(n)]
        ors.append("(" + " AND ".join([*eq, f"{names[n]} > {key[n]}"]) + ")")
    return "(" + " OR ".join(ors) + ")"


def _data_column(plan: Plan, i: int) -> str:
    """Column i as a page reads it: a FLOAT of a binary read as the DOUBLE it converts to
    exactly (its text then has the digits of every bit)."""
    col = plan.columns[i]
    name = sql_identifier(col.org_name.decode())
    return f"CAST({name} AS DOUBLE)" if plan.exact_floats and col.type == T.FLOAT else name


def key_of(plan: Plan) -> Callable[[list], tuple]:
    """A before-image's key values (decoded, in key order) → its key as a page holds it; one
    signed integer column (the usual key) as it is, with no call per value."""
    if plan.integer_key and len(plan.key) == 1 and not plan.columns[plan.key[0]].unsigned:
        return tuple
    return lambda values: tuple(
        _key_value(plan, i, v) for i, v in zip(plan.key, values, strict=True)
    )


def _key_value(plan: Plan, i: int, value: object) -> object:
    """A key column of a before-image as a page's key holds it (an int, or its order)."""
    col = plan.columns[i]
    if plan.integer_key:
        return integer(col, value)  # type: ignore[arg-type]
    text = text_value(col, value, plan.members.get(i, ()))
    return plan.key_orders[plan.key.index(i)](text)  # type: ignore[arg-type]


def order_of(plan: Plan, key: tuple) -> tuple:
    """A key that is not made of integers, as read from a page (each column's text), by its
    columns' order as the DN's ORDER BY gives it: numbers by value, strings under their
    collation (`collation.py`), an ENUM by its index."""
    return tuple(order(text) for order, text in zip(plan.key_orders, key, strict=True))
