"""SELECT over one logical table (docs/snapshot-reads.md, "SQL surface"): the select list
(columns, `*`, COUNT(*), MIN/MAX of a column), FROM one table, WHERE over columns and literals,
ORDER BY, LIMIT. What we do not read (joins, subqueries, other functions, GROUP BY, locking
reads) is refused with 1235 naming the construct, before anything is read."""

from __future__ import annotations

from decimal import Decimal

from dumper.server.handlers import SqlError
from dumper.server.sql.cursor import Cursor, number_value
from dumper.server.sql.points import parse_as_of
from history import PointSpec
from read_path import unsupported
from read_path.request import (
    Between,
    BoolOp,
    Compare,
    InList,
    IsNull,
    Not,
    TableItem,
    TableSelect,
    Where,
    WhereValue,
)

# WHERE's nesting (NOT, parentheses): the evaluators recurse as deep as the tree.
MAX_NESTING = 64
_AGGREGATES = ("COUNT", "MIN", "MAX")
_COMPARISONS = {"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
# Words that end the select list's item or the FROM clause's table (an alias is any other name).
_MODIFIERS = (
    "SQL_NO_CACHE",
    "SQL_CACHE",
    "HIGH_PRIORITY",
    "SQL_SMALL_RESULT",
    "SQL_BIG_RESULT",
    "SQL_BUFFER_RESULT",
)
_CLAUSES = ("FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "FOR", "LOCK", "UNION", "INTO")


def reads_table(cur: Cursor) -> bool:
    """Whether the SELECT at the cursor (after the keyword) reads a table other than DUAL and
    information_schema's (those keep their own answers): a FROM outside parentheses followed by
    a subquery or a name."""
    depth = 0
    for k in range(cur.i, len(cur.toks)):
        tok = cur.toks[k]
        if tok.kind == "op" and tok.text in "()":
            depth += 1 if tok.text == "(" else -1
        elif depth == 0 and tok.word() == "FROM":
            rest = cur.toks[k + 1 : k + 4]
            if not rest:
                return False
            if rest[0].kind == "op" and rest[0].text == "(":
                return True  # a derived table: refused by name in parse_table_select
            if rest[0].kind not in ("ident", "ident_q"):
                return False
            qualified = len(rest) >= 3 and rest[1].kind == "op" and rest[1].text == "."
            if qualified:
                return rest[0].value.lower() != "information_schema"
            return rest[0].word() != "DUAL"
    return False


def parse_table_select(cur: Cursor) -> TableSelect:
    """The rest of a SELECT after its keyword, for which `reads_table` said yes."""
    stmt = parse_table_select_body(cur)
    cur.end()
    return stmt


def parse_table_select_body(cur: Cursor, *, derived: bool = True) -> TableSelect:
    """A SELECT over a table (or the split query's derived table, unless inside one), up to
    what follows it."""
    while any(cur.accept(w) for w in _MODIFIERS):
        pass  # hints about caches and buffers (mariadb-dump's SQL_NO_CACHE): nothing to do
    if cur.accept("DISTINCT") or cur.accept("DISTINCTROW"):
        raise unsupported("DISTINCT")
    cur.accept("ALL")
    items = [_item(cur)]
    while cur.accept(","):
        items.append(_item(cur))
    cur.expect("FROM")
    if cur.accept("("):
        if not derived:
            raise unsupported("a derived table inside a derived table")
        return _derived(cur, items)
    db, table = cur.qualified()
    as_of = _as_of(cur)
    alias = None
    if cur.accept("AS"):
        alias = cur.name()
    elif (tok := cur.peek()) is not None and tok.kind in ("ident", "ident_q"):
        if tok.kind == "ident_q" or tok.word() not in (
            *_CLAUSES,
            "JOIN",
            "INNER",
            "LEFT",
            "RIGHT",
            "CROSS",
            "NATURAL",
            "STRAIGHT_JOIN",
            "USE",
            "FORCE",
            "IGNORE",
            "PARTITION",
        ):
            alias = cur.name()
    if cur.accept(",") or any(
        cur.accept(w)
        for w in ("JOIN", "INNER", "LEFT", "RIGHT", "CROSS", "NATURAL", "STRAIGHT_JOIN")
    ):
        raise unsupported("a join")
    if any(cur.accept(w) for w in ("USE", "FORCE", "IGNORE")):
        raise unsupported("an index hint")
    if cur.accept("PARTITION"):
        raise unsupported("PARTITION (...)")
    if as_of is None:
        as_of = _as_of(cur)  # `t alias AS OF …` too
    stmt = TableSelect(db, table, alias, items, as_of=as_of)
    _check_items(stmt)
    _clauses(cur, stmt)
    return stmt


def _as_of(cur: Cursor) -> PointSpec | None:
    """`AS OF <point>` (TiDB's spelling) or `FOR SYSTEM_TIME AS OF <point>` (MariaDB's) after
    the table: a read as of a past point of the global binlog (sql/points.py)."""
    if cur.accept("AS", "OF") or cur.accept("FOR", "SYSTEM_TIME", "AS", "OF"):
        return parse_as_of(cur)
    if cur.accept("FOR", "SYSTEM_TIME"):
        raise unsupported("FOR SYSTEM_TIME other than AS OF")
    return None


def _clauses(cur: Cursor, stmt: TableSelect) -> None:
    """WHERE, ORDER BY, LIMIT after the table, and the clauses we refuse by name."""
    if cur.accept("WHERE"):
        stmt.where = _or(cur)
    if cur.accept("GROUP", "BY"):
        raise unsupported("GROUP BY")
    if cur.accept("HAVING"):
        raise unsupported("HAVING")
    if cur.accept("ORDER", "BY"):
        stmt.order_by.append(_order_item(cur))
        while cur.accept(","):
            stmt.order_by.append(_order_item(cur))
    if cur.accept("LIMIT"):
        offset, stmt.limit = cur.limit()
        if offset is None and cur.accept("OFFSET"):
            offset = cur.integer()
        if offset is not None:
            stmt.offset = offset
    if cur.accept("FOR", "UPDATE") or cur.accept("LOCK", "IN", "SHARE", "MODE"):
        raise unsupported("a locking read (FOR UPDATE / LOCK IN SHARE MODE)")
    if cur.accept("UNION"):
        raise unsupported("UNION")
    if cur.accept("INTO"):
        raise unsupported("SELECT ... INTO")


def _derived(cur: Cursor, items: list[TableItem]) -> TableSelect:
    """Flink CDC's split query, the one derived table we read: `SELECT MAX(pk) FROM (SELECT pk
    FROM t WHERE pk >= v ORDER BY pk LIMIT n) AS T` (also MIN and COUNT(*) over it). It is the
    inner SELECT with the outer aggregates folded over its first `n` rows (`TableSelect.first`),
    so it streams like any other read; any other shape is refused by name."""
    shape = "a derived table other than aggregates over one SELECT ... LIMIT n (Flink CDC's split query)"
    if not cur.accept("SELECT"):
        raise unsupported(shape)
    inner = parse_table_select_body(cur, derived=False)
    cur.expect(")")
    if inner.aggregate or inner.first is not None:
        raise unsupported(shape)
    alias = None
    tok = cur.peek()
    if cur.accept("AS") or (
        tok is not None
        and (tok.kind == "ident_q" or (tok.kind == "ident" and tok.word() not in _CLAUSES))
    ):
        alias = cur.name()
    if alias is None:
        raise SqlError("Every derived table must have its own alias", 1248, "42000")
    if not cur.at_end():
        raise unsupported(f"'{cur.stmt[cur.peek().start :][:40]}' after a derived table")  # type: ignore[union-attr]
    outputs = _outputs(inner)
    folded = []
    for item in items:
        if item.kind == "COUNT":
            folded.append(item)
        elif item.kind in ("MIN", "MAX") and (outputs is None or item.column in outputs):
            column = item.column if outputs is None else outputs[item.column]  # type: ignore[index]
            folded.append(TableItem(item.kind, column, item.name))
        elif item.kind in ("MIN", "MAX"):
            raise SqlError(f"Unknown column '{item.column}' in 'field list'", 1054, "42S22")
        else:
            raise unsupported(shape)
    return TableSelect(
        inner.db,
        inner.table,
        alias,
        folded,
        where=inner.where,
        order_by=inner.order_by,
        first=inner.limit,
        offset=inner.offset,
        as_of=inner.as_of,
    )


def _outputs(inner: TableSelect) -> dict[str, str] | None:
    """The derived table's column names (lower case) → the table's columns; None: `*`."""
    if any(i.kind == "*" for i in inner.items):
        return None
    return {i.name.lower(): i.column for i in inner.items if i.column is not None}


def _check_items(stmt: TableSelect) -> None:
    if stmt.aggregate and any(i.kind in ("*", "column") for i in stmt.items):
        raise unsupported("columns beside aggregates without GROUP BY")


def _item(cur: Cursor) -> TableItem:
    start = cur.peek()
    if start is None:
        raise cur.error()
    if cur.accept("*"):
        return TableItem("*", None, "*")
    if start.kind == "op" and start.text == "(":
        raise unsupported("a subquery or an expression in the select list")
    if start.kind not in ("ident", "ident_q"):
        raise unsupported(f"the expression '{cur.stmt[start.start : start.start + 40]}'")
    word = start.word()
    nxt = cur.peek(1)
    if nxt is not None and nxt.kind == "op" and nxt.text == "(" and start.kind == "ident":
        if word not in _AGGREGATES:
            raise unsupported(f"the function {word}()")
        cur.i += 2
        if word == "COUNT":
            if not (cur.accept("*") or _accept_one(cur)):
                raise unsupported("COUNT of anything but * or 1")
            column = None
        else:
            column = _column(cur)
        cur.expect(")")
        kind = word
    else:
        column = _column(cur)
        nxt = cur.peek()
        if (
            nxt is not None
            and nxt.kind == "op"
            and nxt.text == "*"
            and cur.toks[cur.i - 1].text == "."
        ):
            cur.i += 1  # t.* (the dot was eaten by _column)
            return TableItem("*", None, "*")
        kind = "column"
    written = cur.stmt[start.start : cur.toks[cur.i - 1].end]
    if kind == "column":
        written = cur.toks[cur.i - 1].value  # MariaDB names a column by its own name as written
    tok = cur.peek()
    if tok is not None and tok.kind == "op" and tok.text not in (",",):
        raise unsupported(f"the operator '{tok.text}' in the select list")
    if cur.accept("AS"):
        return TableItem(kind, column, cur.string_or_name())
    if tok is not None and (
        tok.kind in ("ident_q", "str") or (tok.kind == "ident" and tok.word() not in _CLAUSES)
    ):
        return TableItem(kind, column, cur.string_or_name())
    return TableItem(kind, column, written)


def _accept_one(cur: Cursor) -> bool:
    tok = cur.peek()
    if tok is not None and tok.kind == "num" and tok.text == "1":
        cur.i += 1
        return True
    return False


def _column(cur: Cursor) -> str:
    """A column, maybe qualified (`t.c`, `db.t.c`): its name, lower case. `t.*` leaves the
    cursor at the `*` with the dot eaten."""
    name = cur.name()
    while cur.accept("."):
        tok = cur.peek()
        if tok is not None and tok.kind == "op" and tok.text == "*":
            return name.lower()
        name = cur.name()
    return name.lower()


def _order_item(cur: Cursor) -> tuple[str, bool]:
    tok = cur.peek()
    if tok is None or tok.kind not in ("ident", "ident_q"):
        raise unsupported("ORDER BY an expression or a position")
    column = _column(cur)
    if cur.accept("DESC"):
        return column, True
    cur.accept("ASC")
    return column, False


# -- WHERE ----------------------------------------------------------------------------------------
def _or(cur: Cursor, depth: int = 0) -> Where:
    parts = [_and(cur, depth)]
    while cur.accept("OR") or cur.accept("||"):
        parts.append(_and(cur, depth))
    return parts[0] if len(parts) == 1 else BoolOp("OR", tuple(parts))


def _and(cur: Cursor, depth: int) -> Where:
    parts = [_not(cur, depth)]
    while cur.accept("AND") or cur.accept("&&"):
        parts.append(_not(cur, depth))
    return parts[0] if len(parts) == 1 else BoolOp("AND", tuple(parts))


def _not(cur: Cursor, depth: int = 0) -> Where:
    if cur.accept("NOT") or cur.accept("!"):
        return Not(_nested(cur, depth, _not))
    return _predicate(cur, depth)


def _nested(cur: Cursor, depth: int, parse) -> Where:
    """Recursion with a bound: a WHERE of thousands of NOTs or parentheses is an error, never
    a RecursionError that would end the connection."""
    if depth >= MAX_NESTING:
        raise SqlError(
            f"WHERE nested more than {MAX_NESTING} levels deep (NOT or parentheses)", 1064
        )
    return parse(cur, depth + 1)


def _predicate(cur: Cursor, depth: int) -> Where:
    tok = cur.peek()
    if tok is None:
        raise cur.error()
    if tok.kind == "op" and tok.text == "(":
        nxt = cur.peek(1)
        if nxt is not None and nxt.word() == "SELECT":
            raise unsupported("a subquery in WHERE")
        cur.i += 1
        inner = _nested(cur, depth, _or)
        cur.expect(")")
        return inner
    if tok.kind in ("str", "num") or (tok.kind == "op" and tok.text == "-"):
        value = _value(cur)  # `5 < x`: turned around
        op = _comparison(cur)
        return Compare(_column_operand(cur), _FLIPPED[op], value)
    column = _column_operand(cur)
    if cur.accept("IS"):
        negated = cur.accept("NOT")
        cur.expect("NULL")
        return IsNull(column, negated)
    negated = cur.accept("NOT")
    if cur.accept("BETWEEN"):
        low = _value(cur)
        cur.expect("AND")
        return Between(column, low, _value(cur), negated)
    if cur.accept("IN"):
        cur.expect("(")
        nxt = cur.peek()
        if nxt is not None and nxt.word() == "SELECT":
            raise unsupported("a subquery in WHERE")
        values = [_value(cur)]
        while cur.accept(","):
            values.append(_value(cur))
        cur.expect(")")
        return InList(column, tuple(values), negated)
    if negated:
        raise cur.error()
    if (nxt := cur.peek()) is not None and nxt.word() in ("LIKE", "REGEXP", "RLIKE", "SOUNDS"):
        raise unsupported(nxt.word())
    return Compare(column, _comparison(cur), _value(cur))


def _column_operand(cur: Cursor) -> str:
    tok = cur.peek()
    if tok is None or tok.kind not in ("ident", "ident_q"):
        raise cur.error()
    nxt = cur.peek(1)
    if tok.kind == "ident" and nxt is not None and nxt.kind == "op" and nxt.text == "(":
        raise unsupported(f"the function {tok.word()}()")
    return _column(cur)


def _comparison(cur: Cursor) -> str:
    tok = cur.peek()
    if tok is not None and tok.kind == "op" and tok.text in _COMPARISONS:
        cur.i += 1
        return _COMPARISONS[tok.text]
    if tok is not None and tok.kind == "op" and tok.text == "<=>":
        raise unsupported("<=>")
    if tok is not None and tok.kind == "op" and tok.text in "+-*/%":
        raise unsupported(f"arithmetic ('{tok.text}')")
    raise cur.error()


def _value(cur: Cursor) -> WhereValue:
    tok = cur.next()
    if tok.kind == "str":
        value = tok.value
        while (nxt := cur.peek()) is not None and nxt.kind == "str":
            value += cur.next().value
        return value
    negative = False
    if tok.kind == "op" and tok.text == "-":
        negative = True
        tok = cur.next()
    if tok.kind == "num":
        if tok.text.isdigit():
            number: int | Decimal | float = number_value(tok.text)
        elif "e" in tok.text.lower():
            number = number_value(tok.text)
        else:
            number = Decimal(tok.text)
        return -number if negative else number
    if not negative and tok.kind == "ident" and tok.word() in ("NULL", "TRUE", "FALSE"):
        return {"NULL": None, "TRUE": 1, "FALSE": 0}[tok.word()]
    cur.i -= 1
    if tok.kind == "ident" and (nxt := cur.peek(1)) is not None and nxt.text == "(":
        raise unsupported(f"the function {tok.word()}()")
    if tok.kind in ("ident", "ident_q"):
        raise unsupported("a comparison of two columns")
    if tok.kind == "op" and tok.text == "?":
        raise unsupported("parameters of prepared statements")
    raise cur.error()
