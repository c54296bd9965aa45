"""Physical → logical names for one DN, from the topology valid at a TSO.

A TABLE_MAP event is rewritten with the logical database and table names (byte surgery: the
column part stays as is). Rows of physical tables that have no logical name on this DN at this
TSO are dropped: a partition copy in progress on its future DN, the old copy of a moved
partition, and every replica of a broadcast table but the one on its first DN (otherwise a
broadcast write would reach the global binlog once per DN).
The CRC of a rewritten event is left stale on purpose: the binlog writer reseals every event.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from cdc.binlog import constants, header, splice
from cdc.protocol import dump_packets

_SIZE = struct.Struct("<I")
NAMES_OFFSET = 19 + 8  # header, table_id (6), flags (2)
_NO_CRC = b"\0\0\0\0"
_MISS: Any = object()


@dataclass(slots=True)
class NameMap:
    dn_id: int
    names: dict[tuple[bytes, bytes], tuple[bytes, bytes]] = field(default_factory=dict)
    # The topology it was built from, kept so that one table can be changed (DDL markers).
    topology: dict[str, Any] = field(default_factory=dict)
    _cache: dict[bytes, tuple[bytes, bytes] | None] = field(default_factory=dict)
    dropped: int = 0  # TABLE_MAPs of unmapped physical tables seen (rows dropped with them)
    # Unmapped physical (db, table) names not yet reported: the processor logs each once, so
    # rows that leave the global binlog on purpose (a copy in progress, a broadcast replica)
    # or by mistake (a table made outside the CN) leave a trail either way.
    unreported: list[tuple[bytes, bytes]] = field(default_factory=list)

    @classmethod
    def from_topology(cls, dn_id: int, topology: dict[str, Any]) -> NameMap:
        """Build from the topology JSON of a CdcStart/MetaChange marker (`cdc_equipment/cn/` catalogue)."""
        names: dict[tuple[bytes, bytes], tuple[bytes, bytes]] = {}
        for table in topology.get("tables", []):
            logical = (table["db"].encode(), table["table"].encode())
            physical = table.get("physical", [])
            if table.get("kind", "").lower() == "broadcast":
                physical = physical[:1]  # one replica speaks for all
            for p in physical:
                if int(p["dn"]) == dn_id:
                    names[(p["db"].encode(), p["table"].encode())] = logical
        return cls(dn_id, names, topology)

    def with_table(self, db: str, table: str, entry: dict[str, Any] | None) -> NameMap:
        """A new map where logical `db.table` has topology `entry` (None: the table is gone)."""
        key = (db.lower(), table.lower())
        tables = [
            t
            for t in self.topology.get("tables", [])
            if (t["db"].lower(), t["table"].lower()) != key
        ]
        if entry is not None:
            tables.append(entry)
        return NameMap.from_topology(self.dn_id, {**self.topology, "tables": tables})

    def rename(self, table_map: bytes) -> bytes | None:
        """The TABLE_MAP with logical names, or None if the table has none on this DN."""
        key = table_map[19:-4]  # the body: the header's timestamp changes every time
        cached = self._cache.get(key, _MISS)
        if cached is _MISS:
            body = self._rename_body(key)
            # (the new size field, the renamed body and a CRC left stale): the event is then
            # the old header around a new size, in one join
            cached = None if body is None else (_SIZE.pack(19 + len(body) + 4), body + _NO_CRC)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = cached
        if cached is None:
            self.dropped += 1
            return None
        size, tail = cached
        return b"".join((table_map[:9], size, table_map[13:19], tail))

    def _rename_body(self, body: bytes) -> bytes | None:
        start = NAMES_OFFSET - 19
        db_len = body[start]
        db = body[start + 1 : start + 1 + db_len]
        pos = start + 1 + db_len + 1
        tbl_len = body[pos]
        table = body[pos + 1 : pos + 1 + tbl_len]
        logical = self.names.get((bytes(db), bytes(table)))
        if logical is None:
            self.unreported.append((bytes(db), bytes(table)))  # once: the result is cached
            return None
        ldb, ltable = logical
        names = bytes((len(ldb),)) + ldb + b"\0" + bytes((len(ltable),)) + ltable + b"\0"
        return bytes(body[:start]) + names + bytes(body[pos + 1 + tbl_len + 1 :])


class PackedRenamer:
    """`NameMap.rename` over a MergeSource process's packed statements (`Statement.packed`),
    its answers kept by table id. A TABLE_MAP repeats (same id, same body) before every
    statement on its table: a repeat costs a dict hit, a compare of its body in place and one
    copy of the statement (`dump_packets.splice_body`), where asking the map sliced the event
    and its body out, hashed the body and joined a new event. One per NameMap (the processor
    makes a new one when its names change). Compiled: a cdef class (renamer.pxd)."""

    __slots__ = ("names", "_by_id")

    def __init__(self, names: NameMap):
        self.names = names
        # table id -> (its TABLE_MAP's body as on the DN, the renamed body with its stale CRC,
        # or None: the table has no name here)
        self._by_id: dict[int, tuple[bytes, bytes | None]] = {}

    def rename(self, data: bytes, dropped: set) -> bytes:
        """The statement's events concatenated, each TABLE_MAP renamed, the events of tables
        without a name here dropped (`dropped`: their table ids, shared with the statement's
        fragment), the rest kept as they are: each change one splice (a statement holds about
        one TABLE_MAP), `data` itself when nothing changes."""
        p = data
        pos = 0
        end = len(data)
        table_map = constants.EventType.TABLE_MAP
        while pos < end:
            size = header.event_size(p, pos)
            if size < constants.HEADER_LEN or pos + size > end:
                raise ValueError(f"event size {size} at {pos} overruns its statement")
            if p[pos + 4] == table_map:
                # (its table id and CRC in the event: a shorter one is the map's to judge)
                known = self._by_id.get(header.table_id(p, pos)) if size >= 29 else None
                if known is not None and splice.same(p, pos + 19, size - 23, known[0]):
                    body = known[1]
                    if body is None:
                        self.names.dropped += 1  # as NameMap.rename counts them
                else:
                    body = self._learn(data[pos : pos + size])
                if body is None:
                    dropped.add(data[pos + 19 : pos + 25])
                    data = dump_packets.splice(data, pos, size, b"")
                    p = data
                    end -= size
                    continue
                if dropped:
                    dropped.discard(data[pos + 19 : pos + 25])
                data = dump_packets.splice_body(data, pos, size, body)
                p = data
                end += 19 + len(body) - size
                pos += 19 + len(body)
            elif dropped and data[pos + 19 : pos + 25] in dropped:  # the id sliced only if needed
                data = dump_packets.splice(data, pos, size, b"")
                p = data
                end -= size
            else:
                pos += size
        return data

    def _learn(self, event: bytes) -> bytes | None:
        """The map's answer for a TABLE_MAP not seen by its id (or whose body changed), kept."""
        renamed = self.names.rename(event)
        body = None if renamed is None else renamed[19:]
        if len(self._by_id) > 4096:
            self._by_id.clear()
        if len(event) >= 29:
            self._by_id[header.table_id(event, 0)] = (event[19:-4], body)
        return body
