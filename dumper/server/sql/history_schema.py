"""A `SchemaProvider` answered from the logical schema history in the GMS (what the CN's DDL
markers recorded), so SHOW CREATE TABLE / DESC / information_schema describe logical tables."""

from __future__ import annotations

import time
from collections.abc import Callable

import pymysql

from dumper.server.sql.schema import ColumnSchema, TableSchema
from topology import SchemaHistory

REFRESH_S = 2.0


class HistorySchemaProvider:
    def __init__(self, connect: Callable[[], pymysql.Connection], meta_database: str):
        self._connect = connect
        self._meta_database = meta_database
        self._tables: dict[tuple[str, str], TableSchema] = {}
        self._loaded_at = 0.0

    def _refresh(self) -> None:
        if time.monotonic() - self._loaded_at < REFRESH_S:
            return
        conn = self._connect()
        try:
            records = SchemaHistory(conn, self._meta_database).latest()
        finally:
            conn.close()
        self._tables = {(r.db, r.table): to_table_schema(r.db, r.table, r.schema) for r in records}
        self._loaded_at = time.monotonic()

    def databases(self) -> list[str]:
        self._refresh()
        return sorted({db for db, _ in self._tables})

    def tables(self, db: str) -> list[str]:
        self._refresh()
        return sorted(name for d, name in self._tables if d == db)

    def table(self, db: str, name: str) -> TableSchema | None:
        self._refresh()
        return self._tables.get((db, name))


def to_table_schema(db: str, table: str, schema: dict) -> TableSchema:
    columns = tuple(
        ColumnSchema(
            name=c["name"],
            column_type=c["type"],
            nullable=bool(c.get("nullable", True)),
            key=c.get("key") or "",
            default=c.get("default"),
            charset=c.get("charset"),
            collation=c.get("collation"),
        )
        for c in schema.get("columns", [])
    )
    return TableSchema(db, table, columns, create_sql=schema.get("create", ""))
