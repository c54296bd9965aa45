"""The topology snapshot history: which DNs and which logical↔physical map hold at a TSO.

Written before a marker takes effect, keyed by the marker's instruction id, so replaying the
same marker after a restart finds the decision already taken instead of taking it twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pymysql


class HistoryConflict(RuntimeError):
    """The same instruction id was recorded before with different content."""


@dataclass(frozen=True, slots=True)
class TopologyRecord:
    tso: int
    kind: str  # CdcStart, StorageChange, MetaChange
    instruction_id: str
    content: dict[str, Any]


class TopologyHistory:
    def __init__(self, conn: pymysql.Connection, database: str = "cdc_meta"):
        self._conn = conn
        self._table = f"`{database}`.binlog_topology_history"

    def record(self, rec: TopologyRecord) -> bool:
        """Persist `rec`; True if new, False if this instruction was already recorded."""
        content = json.dumps(rec.content, sort_keys=True, separators=(",", ":"))
        with self._conn.cursor() as cur:
            cur.execute(
                f"INSERT IGNORE INTO {self._table} (tso, kind, instruction_id, content) VALUES (%s, %s, %s, %s)",
                (rec.tso, rec.kind, rec.instruction_id, content),
            )
            if cur.rowcount == 1:
                return True
            cur.execute(
                f"SELECT tso, kind, content FROM {self._table} WHERE instruction_id=%s",
                (rec.instruction_id,),
            )
            tso, kind, stored = cur.fetchone()
        if (int(tso), kind, json.loads(stored)) != (rec.tso, rec.kind, rec.content):
            raise HistoryConflict(
                f"instruction {rec.instruction_id!r} already recorded with other content"
            )
        return False

    def at(self, tso: int) -> TopologyRecord | None:
        """The newest record with TSO ≤ `tso` (the topology valid at `tso`)."""
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT tso, kind, instruction_id, content FROM {self._table} WHERE tso <= %s ORDER BY tso DESC, id DESC LIMIT 1",
                (tso,),
            )
            row = cur.fetchone()
        return _row(row) if row else None

    def all(self) -> list[TopologyRecord]:
        with self._conn.cursor() as cur:
            cur.execute(
                f"SELECT tso, kind, instruction_id, content FROM {self._table} ORDER BY tso, id"
            )
            return [_row(r) for r in cur.fetchall()]


def _row(row: tuple) -> TopologyRecord:
    tso, kind, instruction_id, content = row
    return TopologyRecord(int(tso), kind, instruction_id, json.loads(content))
