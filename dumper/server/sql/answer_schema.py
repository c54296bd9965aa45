"""Answers about the logical schema (the SchemaProvider: the schema history of the CN's DDL):
SHOW DATABASES, TABLES, CREATE TABLE, COLUMNS, INDEX and TABLE STATUS, and DESCRIBE."""

from __future__ import annotations

from collections.abc import Sequence

from cdc.protocol.resultset import Column
from dumper.server.handlers import Result, RowsResult, SqlError, StreamedRows
from dumper.server.sql import statements as st
from dumper.server.sql.answers import LONGLONG_U, Answers, cols
from dumper.server.sql.schema import TableSchema
from dumper.server.sql.variables import like_to_regex


class SchemaAnswers(Answers):
    """The logical schema, from the SchemaProvider."""

    def _db(self, db: str | None) -> str:
        db = db or self.state.db
        if not db:
            raise SqlError("No database selected", 1046, "3D000")
        return db

    def _table(self, db: str | None, name: str) -> TableSchema:
        db = self._db(db)
        table = self.ctx.schema.table(db, name)
        if table is None:
            raise SqlError(f"Table '{db}.{name}' doesn't exist", 1146, "42S02")
        return table

    def show_databases(self, stmt: st.ShowDatabases) -> Result:
        dbs = ["information_schema", *self.ctx.schema.databases()]
        if stmt.like is not None:
            rx = like_to_regex(stmt.like)
            dbs = [d for d in dbs if rx.fullmatch(d)]
        return RowsResult(cols("Database"), [(d,) for d in dbs])

    def show_tables(self, stmt: st.ShowTables) -> Result:
        db = self._db(stmt.db)
        names = self.ctx.schema.tables(db)
        if stmt.like is not None:
            rx = like_to_regex(stmt.like)
            names = [n for n in names if rx.fullmatch(n)]
        if stmt.table_type is not None and stmt.table_type.upper() != "BASE TABLE":
            names = []
        if stmt.full:
            return RowsResult(
                cols(f"Tables_in_{db}", "Table_type"), [(n, "BASE TABLE") for n in names]
            )
        return RowsResult(cols(f"Tables_in_{db}"), [(n,) for n in names])

    def show_create_database(self, stmt: st.ShowCreateDatabase) -> Result:
        if stmt.db not in self.ctx.schema.databases():
            raise SqlError(f"Unknown database '{stmt.db}'", 1049, "42000")
        if_not_exists = "/*!32312 IF NOT EXISTS*/ " if stmt.if_not_exists else ""
        # The CN creates logical databases with the DNs' defaults (utf8mb4).
        text = (
            f"CREATE DATABASE {if_not_exists}`{stmt.db}` /*!40100 DEFAULT CHARACTER SET utf8mb4 */"
        )
        return RowsResult(cols("Database", "Create Database"), [(stmt.db, text)])

    def show_create_table(self, stmt: st.ShowCreateTable) -> Result:
        table = self._table(stmt.db, stmt.table)
        return RowsResult(cols("Table", "Create Table"), [(table.name, table.create_statement())])

    def show_columns(self, stmt: st.ShowColumns) -> Result:
        table = self._table(stmt.db, stmt.table)
        rows: list[Sequence[object]] = []
        for c in table.columns:
            null = "YES" if c.nullable else "NO"
            if stmt.full:
                rows.append(
                    (
                        c.name,
                        c.column_type,
                        c.collation,
                        null,
                        c.key,
                        c.default,
                        c.extra,
                        "select",
                        c.comment,
                    )
                )
            else:
                rows.append((c.name, c.column_type, null, c.key, c.default, c.extra))
        if stmt.full:
            names = (
                "Field",
                "Type",
                "Collation",
                "Null",
                "Key",
                "Default",
                "Extra",
                "Privileges",
                "Comment",
            )
        else:
            names = ("Field", "Type", "Null", "Key", "Default", "Extra")
        return RowsResult(cols(*names), rows)

    def show_index(self, stmt: st.ShowIndex) -> Result:
        """MySQL 5.7's columns, in its order (go-mysql's canal reads them by position)."""
        table = self._table(stmt.db, stmt.table)
        nullable = {c.name.lower(): c.nullable for c in table.columns}
        rows: list[Sequence[object]] = [
            (
                table.name,
                0 if index.unique else 1,
                index.name,
                seq,
                column,
                None if index.kind == "FULLTEXT" else "A",
                None,  # Cardinality: unknown to the binlog server
                sub_part,
                None,
                "YES" if nullable.get(column.lower(), False) else "",
                index.kind,
                "",
                "",
            )
            for index in table.indexes()
            for seq, (column, sub_part) in enumerate(index.columns, 1)
        ]
        names = (
            "Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Collation",
            "Cardinality", "Sub_part", "Packed", "Null", "Index_type", "Comment", "Index_comment",
        )  # fmt: skip
        numeric = {"Non_unique", "Seq_in_index", "Cardinality", "Sub_part"}
        return RowsResult(
            [Column(n, **LONGLONG_U) if n in numeric else Column(n) for n in names], rows
        )

    def show_table_status(self, stmt: st.ShowTableStatus) -> Result:
        """Name, engine and collation from the schema history. `Rows` is the shards' own
        estimate summed (InnoDB's, as MySQL's is: Flink CDC sizes its chunks by it), read from
        the DNs while the result is sent; the other sizes and counts are not known to a binlog
        server (NULL, as for a view)."""
        db = self._db(stmt.db)
        names = self.ctx.schema.tables(db)
        if stmt.like is not None:
            rx = like_to_regex(stmt.like)
            names = [n for n in names if rx.fullmatch(n)]
        rows = []
        for name in names:
            t = self.ctx.schema.table(db, name)
            if t is not None:
                rows.append(
                    (t.name, t.engine, 10, "Dynamic", *[None] * 7)
                    + (None, None, None, t.collation, None, "", t.comment)
                )
        columns = TABLE_STATUS_COLUMNS
        if self.ctx.reads is not None and rows:
            return StreamedRows(self.ctx.reads.row_estimates(db, columns, rows, ROWS_AT))
        return RowsResult(columns, rows)


ROWS_AT = 4  # the Rows column of SHOW TABLE STATUS
TABLE_STATUS_COLUMNS = cols(
    "Name",
    "Engine",
    "Version",
    "Row_format",
    "Rows",
    "Avg_row_length",
    "Data_length",
    "Max_data_length",
    "Index_length",
    "Data_free",
    "Auto_increment",
    "Create_time",
    "Update_time",
    "Check_time",
    "Collation",
    "Checksum",
    "Create_options",
    "Comment",
)
TABLE_STATUS_COLUMNS[ROWS_AT] = Column("Rows", **LONGLONG_U)
