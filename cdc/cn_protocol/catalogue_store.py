"""Reads and writes the CN catalogue in GMS (database `cn_catalog` by default)."""

from __future__ import annotations

import json

from cdc.cn_protocol.catalogue import Catalogue, LogicalTable
from cdc.cn_protocol.gms import GmsStore
from cdc.config import NodeConfig


class CatalogueStore(GmsStore):
    """The whole CN catalogue: the protocol's GMS tables and the logical tables' placement."""

    async def load(self) -> Catalogue:
        storage, tables, parts = await self._run(
            [
                (f"SELECT dn_id FROM `{self.db}`.cn_storage ORDER BY seq", None),
                (
                    f"SELECT db, tbl, kind, shard_key, schema_json FROM `{self.db}`.cn_table",
                    None,
                ),
                (
                    f"SELECT db, tbl, part, dn_id FROM `{self.db}`.cn_partition ORDER BY part",
                    None,
                ),
            ]
        )
        cat = Catalogue(dns=[int(r[0]) for r in storage])
        for db, tbl, kind, shard_key, schema_json in tables:
            cat.put(LogicalTable(db, tbl, kind, shard_key, [], json.loads(schema_json)))
        for db, tbl, _part, dn in parts:
            if cat.has(db, tbl):
                cat.table(db, tbl).placement.append(int(dn))
        return cat

    async def add_storage(self, dn_ids: list[int]) -> None:
        await self._tx(
            [
                (
                    f"INSERT IGNORE INTO `{self.db}`.cn_storage (dn_id, seq) SELECT %s, "
                    f"COALESCE(MAX(seq), 0) + 1 FROM `{self.db}`.cn_storage",
                    (dn,),
                )
                for dn in dn_ids
            ]
        )

    async def save_dns(self, nodes: list[NodeConfig]) -> None:
        """Record where storage DNs are (for CN processes whose config predates them)."""
        await self._tx(
            [
                (
                    f"REPLACE INTO `{self.db}`.cn_dn (dn_id, host, port, user, password, "
                    "server_id, name) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (n.id, n.host, n.port, n.user, n.password, n.server_id, n.name),
                )
                for n in nodes
            ]
        )

    async def dns(self) -> list[NodeConfig]:
        (rows,) = await self._run(
            [
                (
                    f"SELECT dn_id, host, port, user, password, server_id, name FROM `{self.db}`.cn_dn",
                    None,
                )
            ]
        )
        return [NodeConfig(int(r[0]), r[1], int(r[2]), r[3], r[4], int(r[5]), r[6]) for r in rows]

    async def save_table(self, t: LogicalTable) -> None:
        stmts = [
            (
                f"REPLACE INTO `{self.db}`.cn_table (db, tbl, kind, shard_key, schema_json) "
                "VALUES (%s, %s, %s, %s, %s)",
                (t.db, t.name, t.kind, t.shard_key, json.dumps(t.schema)),
            ),
            (f"DELETE FROM `{self.db}`.cn_partition WHERE db = %s AND tbl = %s", (t.db, t.name)),
        ]
        stmts += [
            (
                f"INSERT INTO `{self.db}`.cn_partition (db, tbl, part, dn_id) VALUES (%s,%s,%s,%s)",
                (t.db, t.name, i, dn),
            )
            for i, dn in enumerate(t.placement)
        ]
        await self._tx(stmts)

    async def delete_table(self, db: str, name: str) -> None:
        await self._tx(
            [
                (f"DELETE FROM `{self.db}`.cn_table WHERE db = %s AND tbl = %s", (db, name)),
                (f"DELETE FROM `{self.db}`.cn_partition WHERE db = %s AND tbl = %s", (db, name)),
            ]
        )

    async def get_state(self, key: str) -> str | None:
        (rows,) = await self._run([(f"SELECT v FROM `{self.db}`.cn_state WHERE k = %s", (key,))])
        return rows[0][0] if rows else None

    async def set_state(self, key: str, value: str) -> None:
        await self._run(
            [(f"REPLACE INTO `{self.db}`.cn_state (k, v) VALUES (%s, %s)", (key, value))]
        )
