"""Logical table definitions for SHOW CREATE TABLE, DESC, SHOW TABLES and information_schema
queries: the `SchemaProvider` interface and an in-memory implementation (tests, demos)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from cdc.sql_literal import sql_identifier

# One index line of a SHOW CREATE TABLE text: `  UNIQUE KEY `uk` (`a`,`b`(10))`.
_INDEX_LINE = re.compile(
    r"^\s*(?:(PRIMARY)\s+KEY|(UNIQUE|FULLTEXT|SPATIAL)?\s*(?:KEY|INDEX))\s*(?:`((?:[^`]|``)*)`)?"
    r"\s*(?:USING\s+\w+\s*)?\((.*)\)",
    re.IGNORECASE,
)
_INDEX_PART = re.compile(r"`((?:[^`]|``)*)`\s*(?:\((\d+)\))?\s*(ASC|DESC)?", re.IGNORECASE)


@dataclass(slots=True, frozen=True)
class IndexSchema:
    """An index as SHOW INDEX lists it: one row per column (with its prefix length)."""

    name: str  # "PRIMARY" for the primary key
    unique: bool
    columns: tuple[tuple[str, int | None], ...]  # (column, prefix length or None)
    kind: str = "BTREE"  # or FULLTEXT, SPATIAL


@dataclass(slots=True, frozen=True)
class ColumnSchema:
    name: str
    column_type: str  # as in SHOW COLUMNS, e.g. "int(11)", "varchar(20)"
    nullable: bool = True
    key: str = ""  # "PRI", "UNI", "MUL" or ""
    default: str | None = None
    extra: str = ""
    charset: str | None = None  # None for non-text columns
    collation: str | None = None
    comment: str = ""

    @property
    def data_type(self) -> str:
        return self.column_type.split("(", 1)[0].split(" ", 1)[0].lower()


@dataclass(slots=True, frozen=True)
class TableSchema:
    db: str
    name: str
    columns: tuple[ColumnSchema, ...]
    create_sql: str = ""  # SHOW CREATE TABLE text; built from the columns when empty
    engine: str = "InnoDB"
    collation: str = "utf8mb4_general_ci"
    comment: str = ""

    def indexes(self) -> list[IndexSchema]:
        """The indexes of the CREATE TABLE text; without one, the primary key of the columns."""
        out = []
        for line in self.create_sql.splitlines()[1:]:
            m = _INDEX_LINE.match(line)
            if m is None:
                continue
            primary, kind, name, parts = m.groups()
            columns = tuple(
                (p.group(1).replace("``", "`"), int(p.group(2)) if p.group(2) else None)
                for p in _INDEX_PART.finditer(parts)
            )
            kind = (kind or "").upper()
            out.append(
                IndexSchema(
                    "PRIMARY" if primary else name.replace("``", "`") if name else columns[0][0],
                    bool(primary) or kind == "UNIQUE",
                    columns,
                    kind if kind in ("FULLTEXT", "SPATIAL") else "BTREE",
                )
            )
        if not self.create_sql:
            pk = tuple((c.name, None) for c in self.columns if c.key == "PRI")
            if pk:
                out.append(IndexSchema("PRIMARY", True, pk))
        return out

    def create_statement(self) -> str:
        if self.create_sql:
            return self.create_sql
        lines = []
        for c in self.columns:
            line = f"  `{c.name}` {c.column_type}"
            if not c.nullable:
                line += " NOT NULL"
            if c.default is not None:
                line += f" DEFAULT '{c.default}'"
            elif c.nullable:
                line += " DEFAULT NULL"
            if c.extra:
                line += f" {c.extra}"
            lines.append(line)
        pk = [sql_identifier(c.name) for c in self.columns if c.key == "PRI"]
        if pk:
            lines.append(f"  PRIMARY KEY ({','.join(pk)})")
        charset = self.collation.split("_", 1)[0]
        return (
            f"CREATE TABLE `{self.name}` (\n"
            + ",\n".join(lines)
            + f"\n) ENGINE={self.engine} DEFAULT CHARSET={charset}"
        )


class SchemaProvider(Protocol):
    """What the Dumper needs to know about logical schemas (latest version of each table)."""

    def databases(self) -> list[str]: ...

    def tables(self, db: str) -> list[str]: ...

    def table(self, db: str, name: str) -> TableSchema | None: ...


@dataclass(slots=True)
class InMemorySchemaProvider:
    """Tables given up front or added with `add`; keyed by (db, table), case-sensitive."""

    _tables: dict[tuple[str, str], TableSchema] = field(default_factory=dict)
    _databases: set[str] = field(default_factory=set)

    def add(self, table: TableSchema) -> None:
        self._tables[(table.db, table.name)] = table
        self._databases.add(table.db)

    def databases(self) -> list[str]:
        return sorted(self._databases)

    def tables(self, db: str) -> list[str]:
        return sorted(t for d, t in self._tables if d == db)

    def table(self, db: str, name: str) -> TableSchema | None:
        return self._tables.get((db, name))
