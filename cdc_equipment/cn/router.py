"""Routes one logical statement to physical statements on DNs, by the table's shard key.

Supported shapes (what the workloads and tests use): single-table INSERT with a column list
(multi-row, rows split by shard), UPDATE / DELETE / SELECT with `WHERE <shard_key> = v` or
`<shard_key> IN (...)` ANDed with anything else. SELECT without a shard predicate is scattered
to every partition; UPDATE / DELETE without one are rejected (docs/cn.md, "Routing").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.cn_protocol.catalogue import Catalogue, LogicalTable
from cdc.cn_protocol.errors import RoutingError
from cdc.cn_protocol.sql_text import Token, literal_value, tokenize
from cdc.sql_literal import sql_identifier

_CLAUSE_END = ("ORDER", "LIMIT", "GROUP", "FOR", "HAVING", "LOCK", "RETURNING")


@dataclass(frozen=True, slots=True)
class PhysicalStatement:
    dn_id: int
    sql: str
    partition: int | None = None


@dataclass(slots=True)
class Plan:
    """Physical statements to run in order (subseq = index); `is_select` merges result rows."""

    table: LogicalTable
    statements: list[PhysicalStatement]
    is_select: bool = False
    is_write: bool = True


@dataclass(slots=True)
class ShardKeyMove:
    """An UPDATE that changes the shard key of rows to another partition: SELECT the old rows,
    DELETE them on the old partition(s), INSERT the changed rows on the new one."""

    table: LogicalTable
    old_partitions: list[int]
    new_partition: int
    where: str  # the logical WHERE clause text (after the keyword)
    assignments: dict[str, str] = field(default_factory=dict)  # column -> literal SQL text

    def select_sql(self, partition: int) -> str:
        return f"SELECT * FROM {self.table.physical_name(partition)} WHERE {self.where} FOR UPDATE"

    def delete_sql(self, partition: int) -> str:
        return f"DELETE FROM {self.table.physical_name(partition)} WHERE {self.where}"

    def insert_sql(self, columns: list[str], rows: list[list[str]]) -> str:
        cols = ", ".join(sql_identifier(c) for c in columns)
        values = ", ".join("(" + ", ".join(r) + ")" for r in rows)
        return (
            f"INSERT INTO {self.table.physical_name(self.new_partition)} ({cols}) VALUES {values}"
        )


def route(sql: str, catalogue: Catalogue, default_db: str | None = None) -> Plan | ShardKeyMove:
    tokens = tokenize(sql)
    if not tokens:
        raise RoutingError("empty statement")
    if any(t.kind == "op" and t.text == ";" for t in tokens):
        # Branch connections accept several statements per packet (branch.py): one at a time.
        raise RoutingError(f"one statement at a time, without `;`: {sql[:200]}")
    verb = tokens[0].text.upper()
    if verb == "INSERT":
        return _route_insert(sql, tokens, catalogue, default_db)
    if verb == "UPDATE":
        return _route_update(sql, tokens, catalogue, default_db)
    if verb == "DELETE":
        return _route_delete(sql, tokens, catalogue, default_db)
    if verb == "SELECT":
        return _route_select(sql, tokens, catalogue, default_db)
    raise RoutingError(
        f"the CN routes INSERT/UPDATE/DELETE/SELECT only; got {verb} (use cn.execute_ddl for DDL)"
    )


# -- statement shapes ----------------------------------------------------------------------------


def _route_insert(sql, tokens, catalogue, default_db) -> Plan:
    i = 1
    while i < len(tokens) and tokens[i].is_word("IGNORE", "LOW_PRIORITY", "HIGH_PRIORITY"):
        i += 1
    if i >= len(tokens) or not tokens[i].is_word("INTO"):
        raise RoutingError(f"expected INSERT [IGNORE] INTO <table>: {sql[:200]}")
    table, name_start, name_end, i = _table_at(tokens, i + 1, catalogue, default_db, sql)
    if i >= len(tokens) or tokens[i].text != "(":
        raise RoutingError(
            f"INSERT needs a column list (INSERT INTO t (a, b) VALUES ...): {sql[:200]}"
        )
    close = _matching(tokens, i, sql)
    columns = [t.name.lower() for t in tokens[i + 1 : close] if t.name is not None]
    i = close + 1
    if i >= len(tokens) or not tokens[i].is_word("VALUES", "VALUE"):
        raise RoutingError(f"only INSERT ... VALUES (...) is routed: {sql[:200]}")
    values_kw = tokens[i]
    rows: list[tuple[int, int, list[list[Token]]]] = []
    i += 1
    while i < len(tokens) and tokens[i].text == "(":
        close = _matching(tokens, i, sql)
        rows.append((tokens[i].start, tokens[close].end, _split_commas(tokens[i + 1 : close])))
        i = close + 1
        if i < len(tokens) and tokens[i].text == ",":
            i += 1
        else:
            break
    if not rows:
        raise RoutingError(f"INSERT without rows: {sql[:200]}")
    tail = sql[tokens[i].start :] if i < len(tokens) else ""
    head = sql[: values_kw.end]

    def build(partition: int | None, row_spans: list[tuple[int, int]]) -> str:
        text = ", ".join(sql[s:e] for s, e in row_spans)
        phys_head = head[:name_start] + table.physical_name(partition) + head[name_end:]
        return f"{phys_head} {text}" + (f" {tail}" if tail else "")

    if table.is_broadcast:
        spans = [(s, e) for s, e, _ in rows]
        stmts = [PhysicalStatement(dn, build(None, spans)) for dn in catalogue.dns]
        return Plan(table, stmts)
    key = table.shard_key.lower()
    if key not in columns:
        raise RoutingError(
            f"INSERT into partitioned table {table.db}.{table.name} must list its shard key "
            f"column `{table.shard_key}`: {sql[:200]}"
        )
    k = columns.index(key)
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for start, end, values in rows:
        if len(values) != len(columns):
            raise RoutingError(f"INSERT row has {len(values)} values for {len(columns)} columns")
        p = table.partition_for(_single_literal(values[k], table))
        by_partition.setdefault(p, []).append((start, end))
    stmts = [
        PhysicalStatement(table.placement[p], build(p, spans), p)
        for p, spans in sorted(by_partition.items())
    ]
    return Plan(table, stmts)


def _route_update(sql, tokens, catalogue, default_db) -> Plan | ShardKeyMove:
    i = 1
    while i < len(tokens) and tokens[i].is_word("IGNORE", "LOW_PRIORITY"):
        i += 1
    table, name_start, name_end, i = _table_at(tokens, i, catalogue, default_db, sql)
    if i >= len(tokens) or not tokens[i].is_word("SET"):
        raise RoutingError(f"expected UPDATE <table> SET ...: {sql[:200]}")
    where = _find_top(tokens, i, ("WHERE",))
    set_end = where if where is not None else _find_top(tokens, i, _CLAUSE_END)
    assignments = _split_commas(tokens[i + 1 : set_end if set_end is not None else len(tokens)])
    if table.is_broadcast:
        return _to_all(table, catalogue, sql, name_start, name_end)
    values = _shard_values(tokens, where, table)
    if values is None:
        raise RoutingError(
            f"UPDATE on partitioned table {table.db}.{table.name} needs `WHERE "
            f"{table.shard_key} = <value>` (or IN (...)); the CN does not scatter writes"
        )
    partitions = sorted({table.partition_for(v) for v in values})
    key = table.shard_key.lower()
    moved = [a for a in assignments if a and a[0].name is not None and a[0].name.lower() == key]
    if moved:
        literals = {}
        for a in assignments:
            if len(a) < 3 or a[0].name is None or a[1].text != "=":
                raise RoutingError(f"cannot parse SET assignment in: {sql[:200]}")
            _single_literal(a[2:], table, what="a value assigned in a shard-key UPDATE")
            literals[a[0].name.lower()] = sql[a[2].start : a[-1].end]
        new_partition = table.partition_for(_single_literal(moved[0][2:], table))
        if partitions != [new_partition]:
            return ShardKeyMove(
                table, partitions, new_partition, sql[tokens[where].end :].strip(), literals
            )
    return _to_partitions(table, partitions, sql, name_start, name_end)


def _route_delete(sql, tokens, catalogue, default_db) -> Plan:
    if len(tokens) < 2 or not tokens[1].is_word("FROM"):
        raise RoutingError(f"expected DELETE FROM <table> WHERE ...: {sql[:200]}")
    table, name_start, name_end, i = _table_at(tokens, 2, catalogue, default_db, sql)
    if table.is_broadcast:
        return _to_all(table, catalogue, sql, name_start, name_end)
    values = _shard_values(tokens, _find_top(tokens, i, ("WHERE",)), table)
    if values is None:
        raise RoutingError(
            f"DELETE on partitioned table {table.db}.{table.name} needs `WHERE "
            f"{table.shard_key} = <value>` (or IN (...)); the CN does not scatter writes"
        )
    partitions = sorted({table.partition_for(v) for v in values})
    return _to_partitions(table, partitions, sql, name_start, name_end)


def _route_select(sql, tokens, catalogue, default_db) -> Plan:
    frm = _find_top(tokens, 1, ("FROM",))
    if frm is None:
        raise RoutingError(f"SELECT without FROM has nothing to route: {sql[:200]}")
    table, name_start, name_end, i = _table_at(tokens, frm + 1, catalogue, default_db, sql)
    if i < len(tokens) and (
        tokens[i].text == ","
        or tokens[i].is_word("JOIN", "INNER", "LEFT", "RIGHT", "STRAIGHT_JOIN", "CROSS", "NATURAL")
    ):
        raise RoutingError(f"the CN routes single-table SELECTs only: {sql[:200]}")
    if table.is_broadcast:
        # Any copy will do; the first storage DN keeps reads predictable.
        phys = sql[:name_start] + table.physical_name(None) + sql[name_end:]
        return Plan(table, [PhysicalStatement(catalogue.dns[0], phys)], True, False)
    values = _shard_values(tokens, _find_top(tokens, i, ("WHERE",)), table)
    if values is None:
        partitions = list(range(table.partitions))  # scatter; rows are concatenated
    else:
        partitions = sorted({table.partition_for(v) for v in values})
    plan = _to_partitions(table, partitions, sql, name_start, name_end)
    plan.is_select, plan.is_write = True, False
    return plan


# -- helpers ---------------------------------------------------------------------------------------


def _to_partitions(table, partitions, sql, name_start, name_end) -> Plan:
    return Plan(
        table,
        [
            PhysicalStatement(
                table.placement[p], sql[:name_start] + table.physical_name(p) + sql[name_end:], p
            )
            for p in partitions
        ],
    )


def _to_all(table, catalogue, sql, name_start, name_end) -> Plan:
    phys = sql[:name_start] + table.physical_name(None) + sql[name_end:]
    return Plan(table, [PhysicalStatement(dn, phys) for dn in catalogue.dns])


def _table_at(tokens, i, catalogue: Catalogue, default_db, sql):
    """Parse `[db.]table` at token i; return (table, start, end, next index)."""
    if i >= len(tokens) or tokens[i].name is None:
        raise RoutingError(f"expected a table name: {sql[:200]}")
    first = tokens[i]
    if i + 2 < len(tokens) and tokens[i + 1].text == "." and tokens[i + 2].name is not None:
        db, name, end, nxt = first.name, tokens[i + 2].name, tokens[i + 2].end, i + 3
    else:
        if not default_db:
            raise RoutingError(
                f"table `{first.name}` has no database; write db.table or pass db= to "
                f"cn.transaction(): {sql[:200]}"
            )
        db, name, end, nxt = default_db, first.name, first.end, i + 1
    # An alias (`FROM t AS a` / `FROM t a`) is fine: it stays in the physical statement.
    return catalogue.table(db, name), first.start, end, nxt


def _matching(tokens, i, sql) -> int:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].text == "(" and tokens[j].kind == "op":
            depth += 1
        elif tokens[j].text == ")" and tokens[j].kind == "op":
            depth -= 1
            if depth == 0:
                return j
    raise RoutingError(f"unbalanced parentheses: {sql[:200]}")


def _split_commas(tokens: list[Token]) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    depth = 0
    for t in tokens:
        if t.kind == "op" and t.text == "(":
            depth += 1
        elif t.kind == "op" and t.text == ")":
            depth -= 1
        if depth == 0 and t.kind == "op" and t.text == ",":
            parts.append([])
        else:
            parts[-1].append(t)
    return parts


def _find_top(tokens, start, words) -> int | None:
    depth = 0
    for j in range(start, len(tokens)):
        t = tokens[j]
        if t.kind == "op" and t.text == "(":
            depth += 1
        elif t.kind == "op" and t.text == ")":
            depth -= 1
        elif depth == 0 and t.is_word(*words):
            return j
    return None


def _single_literal(toks: list[Token], table: LogicalTable, what: str = "the shard key") -> object:
    if len(toks) == 2 and toks[0].text == "-" and toks[1].kind == "num":
        return "-" + str(toks[1].value)
    if len(toks) == 1 and toks[0].is_word("NULL"):
        return None
    if len(toks) != 1:
        raise RoutingError(
            f"{what} of {table.db}.{table.name} must be a literal value, got "
            f"{' '.join(t.text for t in toks)!r}"
        )
    return literal_value(toks[0])


def _shard_values(tokens, where, table: LogicalTable) -> list[object] | None:
    """Values v of a top-level `key = v` / `key IN (v, ...)` conjunct of the WHERE clause."""
    if where is None:
        return None
    end = _find_top(tokens, where + 1, _CLAUSE_END) or len(tokens)
    clause = tokens[where + 1 : end]
    depth = 0
    for t in clause:
        depth += (t.text == "(") - (t.text == ")") if t.kind == "op" else 0
        if depth == 0 and (t.is_word("OR", "XOR") or (t.kind == "op" and t.text == "|")):
            return None  # a disjunction may reach any partition
    key = table.shard_key.lower()
    depth = 0
    for j, t in enumerate(clause):
        if t.kind == "op" and t.text in "()":
            depth += 1 if t.text == "(" else -1
            continue
        if depth or t.name is None or t.name.lower() != key:
            continue
        if j + 1 < len(clause) and clause[j + 1].text == ".":
            continue  # `key.x` is not our column
        rest = clause[j + 1 :]
        if len(rest) >= 2 and rest[0].text == "=":
            n = 3 if rest[1].text == "-" else 2
            return [_single_literal(rest[1:n], table)]
        if len(rest) >= 3 and rest[0].is_word("IN") and rest[1].text == "(":
            close = _matching(rest, 1, "IN list")
            return [_single_literal(v, table) for v in _split_commas(rest[2:close])]
    return None
