"""Stable logical table ids for the global binlog: one per logical table and schema version.

DN table ids are local to each DN (two DNs may use id 18 for different tables), so every
TABLE_MAP is renumbered. A DDL on a table gives it a fresh id: consumers that cache a table's
columns by id then never apply an old column list to rows of the new schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_ID = 1000
MAX_ID = (1 << 48) - 2  # 0xFFFFFFFFFFFF is reserved (dummy table id)


@dataclass(slots=True)
class TableIdMap:
    next_id: int = FIRST_ID
    _ids: dict[tuple[bytes, bytes], int] = field(default_factory=dict)

    def id_for(self, db: bytes, table: bytes) -> int:
        key = (db, table)
        tid = self._ids.get(key)
        if tid is None:
            tid = self._ids[key] = self._allocate()
        return tid

    def bump(self, db: bytes, table: bytes) -> None:
        """After DDL on `db.table`: its next TABLE_MAP gets a new id."""
        self._ids.pop((db, table), None)

    def _allocate(self) -> int:
        tid = self.next_id
        self.next_id = FIRST_ID if tid >= MAX_ID else tid + 1
        return tid
