"""Reads and writes the CN catalogue in GMS (database `cn_catalog` by default)."""

from __future__ import annotations

import json
import os
import socket

import pymysql

from cdc.cn import schema
from cdc.cn.catalogue import Catalogue, LogicalTable
from cdc.cn.dn_conn import DnConnection
from cdc.cn.errors import NotInitialisedError

ER_BAD_DB = 1049
ER_NO_SUCH_TABLE = 1146


class CatalogueStore:
    """Thin async DAO over one GMS connection (opened per call: catalogue changes are rare)."""

    def __init__(self, connect, catalog_db: str):
        self._connect = connect
        self.db = catalog_db

    async def _run(self, statements: list[tuple[str, tuple | None]]) -> list[list[tuple]]:
        conn: DnConnection = await self._connect()
        try:
            out = []
            async with conn.cursor() as cur:
                for sql, params in statements:
                    await cur.execute(sql, params)
                    out.append(list(await cur.fetchall()) if cur.description else [cur.lastrowid])
            return out
        finally:
            conn.close()

    async def _tx(self, statements: list[tuple[str, tuple | None]]) -> None:
        await self._run([("BEGIN", None), *statements, ("COMMIT", None)])

    async def ensure_schema(self) -> None:
        await self._run([(sql, None) for sql in schema.gms_tables(self.db)])

    async def register_instance(self, server_id: int) -> int:
        (row,) = await self._run(
            [
                (
                    f"INSERT INTO `{self.db}`.cn_instance (server_id, host, pid, started_at) "
                    "VALUES (%s, %s, %s, NOW(6))",
                    (server_id, socket.gethostname(), os.getpid()),
                )
            ]
        )
        return int(row[0])

    async def storage_dns(self) -> list[int]:
        """The storage DNs alone: what a poller compares before it loads the whole catalogue."""
        (rows,) = await self._run(
            [(f"SELECT dn_id FROM `{self.db}`.cn_storage ORDER BY seq", None)]
        )
        return [int(r[0]) for r in rows]

    async def load(self) -> Catalogue:
        try:
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
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] in (ER_BAD_DB, ER_NO_SUCH_TABLE):
                raise NotInitialisedError(
                    f"no CN catalogue in GMS database `{self.db}`: run `cdc cn init` first"
                ) from None
            raise
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
