"""What the protocol reads and writes in the GMS (the CN catalogue database, `cn_catalog` by
default): its tables' creation, a writer's instance registration (its txn ids' high half) and
the storage DNs. The TSO row is `tso.py`'s; the logical tables' rows are `catalogue_store.py`'s."""

from __future__ import annotations

import os
import socket

import pymysql

from cdc.cn_protocol import schema
from cdc.cn_protocol.dn_conn import DnConnection
from cdc.cn_protocol.errors import NotInitialisedError

ER_BAD_DB = 1049
ER_NO_SUCH_TABLE = 1146

Statements = list[tuple[str, tuple | None]]


async def execute(conn: DnConnection, statements: Statements) -> list[list]:
    """Run `statements` in order on `conn`: the rows of each, or [its affected-row count] for
    one without a result set. How the CN code runs its GMS statements: a store on a connection
    per call (`GmsStore`), a CN's membership on the connection it keeps."""
    out = []
    async with conn.cursor() as cur:
        for sql, params in statements:
            count = await cur.execute(sql, params)
            out.append(list(await cur.fetchall()) if cur.description else [count])
    return out


class GmsStore:
    """Thin async DAO over one GMS connection (opened per call: these calls are rare)."""

    def __init__(self, connect, catalogue_db: str):
        self._connect = connect
        self.db = catalogue_db

    async def _run(self, statements: Statements) -> list[list]:
        conn: DnConnection = await self._connect()
        try:
            return await execute(conn, statements)
        except pymysql.err.MySQLError as exc:
            if exc.args and exc.args[0] in (ER_BAD_DB, ER_NO_SUCH_TABLE):
                raise NotInitialisedError(
                    f"no CN catalogue in GMS database `{self.db}`: run `cdc cn init` first"
                ) from None
            raise
        finally:
            conn.close()

    async def run(self, statements: Statements) -> list[list]:
        """`_run` for a reader that is no store of its own (`cdc cn jobs` lists the job log)."""
        return await self._run(statements)

    async def _tx(self, statements: Statements) -> None:
        await self._run([("BEGIN", None), *statements, ("COMMIT", None)])

    async def ensure_schema(self) -> None:
        await self._run([(sql, None) for sql in schema.gms_tables(self.db)])

    async def register_instance(self, server_id: int) -> int:
        _, ((instance_id,),) = await self._run(
            [
                (
                    f"INSERT INTO `{self.db}`.cn_instance (server_id, host, pid, started_at) "
                    "VALUES (%s, %s, %s, NOW(6))",
                    (server_id, socket.gethostname(), os.getpid()),
                ),
                ("SELECT LAST_INSERT_ID()", None),  # this connection's: the row just inserted
            ]
        )
        return int(instance_id)

    async def storage_dns(self) -> list[int]:
        """The storage DNs in join order: the DNs every private statement runs on."""
        (rows,) = await self._run(
            [(f"SELECT dn_id FROM `{self.db}`.cn_storage ORDER BY seq", None)]
        )
        return [int(r[0]) for r in rows]
