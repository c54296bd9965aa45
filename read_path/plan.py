"""A read's plan, made before a row is read: the table's columns (read from its first shard),
its primary key, the positions a page reads, whether the rows come in key order or are sorted,
and the result's columns renamed to the logical table. Unknown columns, a table without a
primary key and a collation without exact weights are refused here, never midway."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from cdc.protocol.sql_error import SqlError
from cdc.sql_literal import sql_identifier
from read_path.order import check_keep
from read_path.past_shape import PastShape
from read_path.request import TableSelect, unsupported
from read_path.source import DnReader, Shard
from read_path.values import INTEGER_TYPES, ColumnDef, order_key, split_fields
from read_path.where import columns_of

ER_BAD_FIELD = 1054
_MEMBERS = re.compile(r"'((?:[^']|'')*)'")


@dataclass(slots=True)
class Plan:
    columns: list[ColumnDef]  # the table's, in order (SELECT * on a shard)
    index: dict[str, int]  # lower-case name → position
    members: dict[int, tuple[str, ...]]  # ENUM/SET values by position
    key: list[int]  # primary key positions
    data: list[int]  # the positions a page reads after the key
    # Integer keys order the same in Python as on the DN, so their chunks may be bounded; any
    # other key is read in one page per shard (one chunk, no bound the DN would compare), its
    # rows keyed by their order in Python (`keys.order_of`).
    integer_key: bool
    # The statement's rows come in primary-key order (no ORDER BY, or a prefix of the key
    # ascending): streamed as read; otherwise sorted (`order.Sorter`).
    key_order: bool = True
    shown: int = 0  # of `data`, the fields the result shows (the rest: ORDER BY columns)
    # A binary-protocol read: FLOAT data columns are read as DOUBLEs (CAST, exact), as the
    # text protocol's 6 digits lose a FLOAT's last bits, which the binary row carries.
    exact_floats: bool = False
    result: list[ColumnDef] = field(default_factory=list)
    # A key not made of integers: each column's text → its order (`keys.order_of`).
    key_orders: list[Callable[[bytes], object]] = field(default_factory=list)


def keep(stmt: TableSelect) -> int | None:
    """How many rows of the sorted order the statement can show (LIMIT, or the split query's
    first rows), after its offset; None: all."""
    shown = stmt.first if stmt.aggregate else stmt.limit
    return None if shown is None else stmt.offset + shown


async def plan(
    stmt: TableSelect,
    db: str,
    reader: DnReader,
    first: Shard,
    binary: bool,
    sort_rows: int,
    past: PastShape | None = None,
) -> Plan:
    """The plan of `stmt` over `db`, from the table's `first` shard (read by `reader`);
    `binary`: its rows are for the binary protocol (FLOATs exact); `past`: the table's shape
    at a past point (read_path/past_shape.py; None: the shards' now)."""
    listed = "*" if past is None else ", ".join(sql_identifier(n) for n in past.names)
    defs, _ = await reader.query(f"SELECT {listed} FROM {first.name} LIMIT 0")
    columns = [ColumnDef.parse(p) for p in defs]
    if past is not None:  # a column wider now than at P: its packet as at P
        columns = [past.as_at_p(c, c.org_name.decode()) for c in columns]
    index = {c.org_name.decode().lower(): i for i, c in enumerate(columns)}
    _, described = await reader.query(f"SHOW FULL COLUMNS FROM {first.name}")
    members: dict[int, tuple[str, ...]] = {}
    for row in described:
        (name, type_, declared), _ = split_fields(row, 3)
        at = index.get((name or b"").decode().lower())
        if at is None:
            continue  # added after the point the read is as of
        text = (type_ or b"").decode()
        if text.startswith(("enum(", "set(")):
            members[at] = tuple(m.replace("''", "'") for m in _MEMBERS.findall(text))
        if declared:  # the result sets' packets name the connection's collation instead
            columns[at] = replace(columns[at], declared=declared.decode())
    _, keys = await reader.query(f"SHOW KEYS FROM {first.name} WHERE Key_name = 'PRIMARY'")
    key_names = [split_fields(r, 5)[0][4] for r in keys]
    key = [index[(k or b"").decode().lower()] for k in key_names]
    if not key:
        raise unsupported("a table without a primary key")
    integer_key = all(columns[i].type in INTEGER_TYPES for i in key)
    # An aggregate over all the rows does not care for their order; the split query's
    # over its first rows does.
    key_order = _check_columns(stmt, index, key) or (stmt.aggregate and stmt.first is None)
    for i in _compared(stmt, index, [] if integer_key else key):
        if not columns[i].numeric:
            columns[i].collation.check()  # refused before a row is read, not midway
    data = _data_positions(stmt, index, len(columns))
    shown = len(data)
    if not key_order:
        data += [index[c] for c, _ in stmt.order_by if index[c] not in data]
        check_keep(keep(stmt), sort_rows)
    out = Plan(columns, index, members, key, data, integer_key, key_order, shown, binary)
    if not integer_key:  # ordered as the DN orders it: an ENUM by its index
        out.key_orders = [order_key(columns[i], members.get(i, ())) for i in key]
    out.result = await _result_columns(stmt, db, reader, first, out, past)
    return out


def _check_columns(stmt: TableSelect, index: dict[str, int], key: list[int]) -> bool:
    """Unknown columns refused as MySQL does; whether ORDER BY is the primary key's order."""

    def known(column: str, clause: str) -> None:
        if column not in index:
            raise SqlError(f"Unknown column '{column}' in '{clause}'", ER_BAD_FIELD, "42S22")

    for item in stmt.items:
        if item.column is not None:
            known(item.column, "field list")
    if stmt.where is not None:
        for column in columns_of(stmt.where):
            known(column, "where clause")
    key_order = True
    for i, (column, descending) in enumerate(stmt.order_by):
        known(column, "order clause")
        if descending or i >= len(key) or index[column] != key[i]:
            key_order = False
    return key_order


def _compared(stmt: TableSelect, index: dict[str, int], key: list[int]) -> set[int]:
    """The columns whose values the read orders or compares in Python (`key`: a key that is
    not made of integers, ordered by its values): WHERE, ORDER BY, MIN/MAX."""
    out = set(key) | {index[c] for c, _ in stmt.order_by}
    out |= {index[i.column] for i in stmt.items if i.kind in ("MIN", "MAX") and i.column}
    if stmt.where is not None:
        out |= {index[c] for c in columns_of(stmt.where)}
    return out


def _data_positions(stmt: TableSelect, index: dict[str, int], count: int) -> list[int]:
    out: list[int] = []
    for item in stmt.items:
        if item.kind == "*":
            out.extend(range(count))
        elif item.kind in ("column", "MIN", "MAX"):
            out.append(index[item.column])  # type: ignore[index]
    return out


async def _result_columns(
    stmt: TableSelect, db: str, reader: DnReader, shard: Shard, plan: Plan, past: PastShape | None
) -> list[ColumnDef]:
    """The DN's definitions for the select list, renamed to the logical table (`past`: `*`
    is the columns the table had at the read's point, by name, each as its type there)."""
    parts = []
    # Each definition's column (a MIN/MAX's too: False), for `past`.
    of: list[tuple[str | None, bool]] = []
    for item in stmt.items:
        if item.kind == "*":
            of += [(c.org_name.decode(), True) for c in plan.columns]
            parts.append(
                "*"
                if len(stmt.items) == 1 and past is None
                else ", ".join(sql_identifier(c.org_name.decode()) for c in plan.columns)
            )
            continue
        of.append((item.column, item.kind == "column"))
        if item.kind == "column":
            parts.append(f"{sql_identifier(item.column)} AS {sql_identifier(item.name)}")  # type: ignore[arg-type]
        elif item.kind == "COUNT":
            parts.append(f"COUNT(*) AS {sql_identifier(item.name)}")
        else:
            parts.append(
                f"{item.kind}({sql_identifier(item.column)}) AS {sql_identifier(item.name)}"
            )  # type: ignore[arg-type]
    defs, _ = await reader.query(f"SELECT {', '.join(parts)} FROM {shard.name} LIMIT 0")
    alias = stmt.alias or stmt.table
    out = [ColumnDef.parse(p).renamed(db, stmt.table, alias) for p in defs]
    if past is not None:
        out = [past.as_at_p(c, *named) for c, named in zip(out, of, strict=True)]
    return out
