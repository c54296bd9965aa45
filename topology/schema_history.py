"""The logical schema history: the schema of each logical table as of any TSO."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pymysql

from topology.topology_history import HistoryConflict


@dataclass(frozen=True, slots=True)
class SchemaRecord:
    tso: int
    db: str
    table: str
    ddl: str
    schema: dict[str, Any]  # the logical table definition after `ddl` ({} after DROP TABLE)
    instruction_id: str


class SchemaHistory:
    def __init__(self, conn: pymysql.Connection, database: str = "cdc_meta"):
        self._conn = conn
        self._table = f"`{database}`.binlog_logic_meta_history"

    def record(self, rec: SchemaRecord) -> bool:
        """Persist `rec` once per instruction id; True if new."""
        schema = json.dumps(rec.schema, sort_keys=True, separators=(",", ":"))
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT IGNORE INTO {self._table} (tso, db_name, table_name, ddl, table_schema, instruction_id) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (rec.tso, rec.db, rec.table, rec.ddl, schema, rec.instruction_id),
            )
            if cur.rowcount == 1:
                return True
            cur.execute(
                f"SELECT tso, ddl FROM {self._table} WHERE instruction_id=%s", (rec.instruction_id,)
            )
            tso, ddl = cur.fetchone()
        if (int(tso), ddl) != (rec.tso, rec.ddl):
            raise HistoryConflict(
                f"DDL instruction {rec.instruction_id!r} already recorded with other content"
            )
        return False

    def between(self, after_tso: int, upto_tso: int) -> list[SchemaRecord]:
        """Every record with `after_tso` < TSO ≤ `upto_tso`, in TSO order (replaying DDL)."""
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT tso, db_name, table_name, ddl, table_schema, instruction_id FROM {self._table} "
                "WHERE tso > %s AND tso <= %s ORDER BY tso, id",
                (after_tso, upto_tso),
            )
            rows = cur.fetchall()
        return [SchemaRecord(int(t), d, n, ddl, json.loads(s), i) for t, d, n, ddl, s, i in rows]

    def latest(self) -> list[SchemaRecord]:
        """The newest record of every table that still exists (its schema is not empty)."""
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT h.tso, h.db_name, h.table_name, h.ddl, h.table_schema, h.instruction_id FROM {self._table} h "
                f"JOIN (SELECT MAX(id) AS id FROM {self._table} GROUP BY db_name, table_name) m ON h.id = m.id "
                "ORDER BY h.db_name, h.table_name"
            )
            rows = cur.fetchall()
        records = [SchemaRecord(int(t), d, n, ddl, json.loads(s), i) for t, d, n, ddl, s, i in rows]
        return [r for r in records if r.schema]

    def after(self, db: str, table: str, tso: int) -> list[SchemaRecord]:
        """Every record of `db.table` with TSO > `tso`, in TSO order (the DDL a read as of a
        point before them crosses: read_path/past_shape.py)."""
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT tso, db_name, table_name, ddl, table_schema, instruction_id FROM {self._table} "
                "WHERE db_name=%s AND table_name=%s AND tso > %s ORDER BY tso, id",
                (db, table, tso),
            )
            rows = cur.fetchall()
        return [SchemaRecord(int(t), d, n, ddl, json.loads(s), i) for t, d, n, ddl, s, i in rows]

    def at(self, db: str, table: str, tso: int) -> SchemaRecord | None:
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT tso, db_name, table_name, ddl, table_schema, instruction_id FROM {self._table} "
                "WHERE db_name=%s AND table_name=%s AND tso <= %s ORDER BY tso DESC, id DESC LIMIT 1",
                (db, table, tso),
            )
            row = cur.fetchone()
        if row is None:
            return None
        tso_, db_, table_, ddl, schema, iid = row
        return SchemaRecord(int(tso_), db_, table_, ddl, json.loads(schema), iid)
