"""Answers of information_schema: SELECTs over COLUMNS, TABLES, SCHEMATA, STATISTICS and
KEY_COLUMN_USAGE, made from the SchemaProvider, with their WHERE conditions and LIMIT."""

from __future__ import annotations

from cdc.protocol.constants import ColumnType
from cdc.protocol.resultset import Column
from dumper.server.handlers import Result, RowsResult, SqlError
from dumper.server.sql import statements as st
from dumper.server.sql.answers import Answers
from dumper.server.sql.schema import TableSchema
from dumper.server.sql.variables import like_to_regex

# information_schema columns sent as integers.
_NUMERIC_INFO = frozenset(
    ("ordinal_position", "non_unique", "seq_in_index", "cardinality", "sub_part")
)


class InfoSchemaAnswers(Answers):
    """information_schema tables made from the SchemaProvider."""

    def select(self, stmt: st.InfoSchemaSelect) -> Result:
        records = self._info_schema_rows(stmt.table)
        if records is None:
            raise SqlError(
                f"Table 'information_schema.{stmt.table}' is not served by the binlog server",
                1146,
                "42S02",
            )
        all_cols = list(records[0]) if records else list(self._info_schema_columns(stmt.table))
        for cond in stmt.where:
            if cond.column not in all_cols:
                raise SqlError(f"Unknown column '{cond.column}' in 'where clause'", 1054, "42S22")
        wanted: list[tuple[str, str]] = []
        for src, out in stmt.columns:
            if src == "*":
                wanted += [(c, c.upper()) for c in all_cols]
            elif src not in all_cols:
                raise SqlError(f"Unknown column '{out}' in 'field list'", 1054, "42S22")
            else:
                wanted.append((src, out))

        def keep(rec: dict[str, object]) -> bool:
            for cond in stmt.where:
                value = "" if rec[cond.column] is None else str(rec[cond.column])
                if cond.op == "LIKE":
                    if not like_to_regex(cond.values[0]).fullmatch(value):
                        return False
                elif cond.op == "=DATABASE()":
                    if value != (self.state.db or ""):
                        return False
                elif value not in cond.values:
                    return False
            return True

        rows = [[rec[c] for c, _ in wanted] for rec in records if keep(rec)]
        if stmt.limit is not None:
            rows = rows[: stmt.limit]
        columns = [
            Column(out, ColumnType.LONGLONG) if src in _NUMERIC_INFO else Column(out)
            for src, out in wanted
        ]
        return RowsResult(columns, rows)

    @staticmethod
    def _info_schema_columns(table: str) -> tuple[str, ...]:
        return {
            "columns": (
                "table_catalog",
                "table_schema",
                "table_name",
                "column_name",
                "ordinal_position",
                "column_default",
                "is_nullable",
                "data_type",
                "character_set_name",
                "collation_name",
                "column_type",
                "column_key",
                "extra",
                "privileges",
                "column_comment",
                "generation_expression",  # mariadb-dump asks; no generated columns: NULL
            ),
            "tables": (
                "table_catalog",
                "table_schema",
                "table_name",
                "table_type",
                "engine",
                "table_collation",
                "table_comment",
            ),
            "schemata": (
                "catalog_name",
                "schema_name",
                "default_character_set_name",
                "default_collation_name",
            ),
            "statistics": (
                "table_catalog",
                "table_schema",
                "table_name",
                "non_unique",
                "index_schema",
                "index_name",
                "seq_in_index",
                "column_name",
                "collation",
                "cardinality",
                "sub_part",
                "packed",
                "nullable",
                "index_type",
                "comment",
                "index_comment",
            ),  # fmt: skip
            "key_column_usage": (
                "constraint_catalog",
                "constraint_schema",
                "constraint_name",
                "table_catalog",
                "table_schema",
                "table_name",
                "column_name",
                "ordinal_position",
                "position_in_unique_constraint",
                "referenced_table_schema",
                "referenced_table_name",
                "referenced_column_name",
            ),  # fmt: skip
        }.get(table, ())

    def _info_schema_rows(self, table: str) -> list[dict[str, object]] | None:
        schema = self.ctx.schema
        if table == "schemata":
            return [
                dict(
                    zip(
                        self._info_schema_columns(table),
                        ("def", db, "utf8mb4", "utf8mb4_general_ci"),
                        strict=True,
                    )
                )
                for db in schema.databases()
            ]
        if table not in ("columns", "tables", "statistics", "key_column_usage"):
            return None
        out: list[dict[str, object]] = []
        for db in schema.databases():
            for name in schema.tables(db):
                t = schema.table(db, name)
                if t is None:
                    continue
                if table in ("statistics", "key_column_usage"):
                    out += self._index_rows(table, db, t)
                    continue
                if table == "tables":
                    values: tuple[object, ...] = (
                        "def",
                        db,
                        name,
                        "BASE TABLE",
                        t.engine,
                        t.collation,
                        t.comment,
                    )
                    out.append(dict(zip(self._info_schema_columns(table), values, strict=True)))
                    continue
                for i, c in enumerate(t.columns, 1):
                    values = (
                        "def",
                        db,
                        name,
                        c.name,
                        i,
                        c.default,
                        "YES" if c.nullable else "NO",
                        c.data_type,
                        c.charset,
                        c.collation,
                        c.column_type,
                        c.key,
                        c.extra,
                        "select",
                        c.comment,
                        None,
                    )
                    out.append(dict(zip(self._info_schema_columns(table), values, strict=True)))
        return out

    def _index_rows(self, table: str, db: str, t: TableSchema) -> list[dict[str, object]]:
        """STATISTICS: a row per index column; KEY_COLUMN_USAGE: those of unique indexes."""
        names = self._info_schema_columns(table)
        nullable = {c.name.lower(): c.nullable for c in t.columns}
        out = []
        for index in t.indexes():
            if table == "key_column_usage" and not index.unique:
                continue
            for seq, (column, sub_part) in enumerate(index.columns, 1):
                if table == "statistics":
                    values: tuple[object, ...] = (
                        "def", db, t.name, 0 if index.unique else 1, db, index.name, seq,
                        column, "A", None, sub_part, None,
                        "YES" if nullable.get(column.lower(), False) else "", index.kind, "", "",
                    )  # fmt: skip
                else:
                    values = ("def", db, index.name, "def", db, t.name, column, seq)
                    values += (None, None, None, None)
                out.append(dict(zip(names, values, strict=True)))
        return out
