"""The CN's DN client (`cdc/cn_protocol/dn_conn.py`) against a real DN: the same row values, rowcounts
and exception classes as pymysql (the commit protocol and recovery branch on them), results of
a multi-statement packet one by one with the failing statement's error, a broken connection as
OperationalError 2013; and its pool's hand-over rules."""

from __future__ import annotations

import asyncio
import datetime
import decimal

import pymysql
import pytest

from cdc.cn_protocol.dn_conn import DnConnection, DnPool

TABLE = "dn_conn_test.t"


async def connect(node, multi: bool = True) -> DnConnection:
    return await DnConnection.connect(node.host, node.port, node.user, node.password, multi, 5)


def pymysql_rows(node, sql: str) -> list[tuple]:
    """What pymysql reads for `sql` (the reference for our client's values)."""
    args = {"host": node.host, "port": node.port, "user": node.user, "charset": "utf8mb4"}
    with pymysql.connect(**args) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return list(cur.fetchall())


async def test_values_rowcount_and_errors_as_pymysql(cn_config):
    node = cn_config.dn[0]
    conn = await connect(node)
    try:
        async with conn.cursor() as cur:
            await cur.execute("CREATE DATABASE IF NOT EXISTS dn_conn_test")
            await cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
            await cur.execute(
                f"CREATE TABLE {TABLE} (id BIGINT UNSIGNED PRIMARY KEY, s VARCHAR(20),"
                " b VARBINARY(8), d DECIMAL(6,2), t DATETIME(6), j JSON, n INT)"
            )
            params = (1, "héllo 'x'", b"\x00\xff'", decimal.Decimal("12.50"))
            await cur.execute(
                f"INSERT INTO {TABLE} VALUES (%s, %s, %s, %s, '2026-11-22 08:00:00.5',"
                " '{\"a\": 1}', NULL)",
                params,
            )
            assert cur.rowcount == 1
            await cur.execute(f"UPDATE {TABLE} SET n = NULL WHERE id = 1")
            assert cur.rowcount == 0  # changed rows, not matched rows (no FOUND_ROWS)
            await cur.execute(f"SELECT * FROM {TABLE}")
            rows = await cur.fetchall()
            assert [d[0] for d in cur.description] == ["id", "s", "b", "d", "t", "j", "n"]
        assert rows == pymysql_rows(node, f"SELECT * FROM {TABLE}")
        assert rows[0][:5] == (
            1,
            "héllo 'x'",
            b"\x00\xff'",
            decimal.Decimal("12.50"),
            datetime.datetime(2026, 11, 22, 8, 0, 0, 500000),
        )
        cur = await conn.cursor()
        with pytest.raises(pymysql.err.IntegrityError) as dup:
            await cur.execute(f"INSERT INTO {TABLE} (id) VALUES (1)")
        assert dup.value.args[0] == 1062
        # One packet, three statements, the second fails: the first's result, then its error.
        await cur.execute(f"SELECT 1; INSERT INTO {TABLE} (id) VALUES (1); SELECT 2")
        assert await cur.fetchall() == [(1,)]
        with pytest.raises(pymysql.err.IntegrityError):
            await cur.nextset()
        assert await cur.nextset() is None
        await cur.execute("SELECT 3")  # the connection is still in step
        assert await cur.fetchall() == [(3,)]
        # The server closes the connection (as after a DN restart): OperationalError 2013.
        await cur.execute("SELECT CONNECTION_ID()")
        (conn_id,) = (await cur.fetchall())[0]
        other = await connect(node)
        await (await other.cursor()).execute(f"KILL {conn_id}")
        other.close()
        with pytest.raises(pymysql.err.OperationalError) as lost:
            await cur.execute("SELECT 4")
        assert lost.value.args[0] == 2013 and conn.closed
    finally:
        conn.close()


class FakeConn:
    """Stands for a connection in the pool's own bookkeeping (no protocol involved)."""

    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


async def test_pool_hands_over_and_drops_closed():
    made: list[FakeConn] = []

    async def new() -> FakeConn:
        made.append(FakeConn())
        return made[-1]

    pool = DnPool(new, maxsize=2)
    a, b = await pool.acquire(), await pool.acquire()
    waiter = asyncio.create_task(pool.acquire())
    await asyncio.sleep(0)
    assert not waiter.done() and pool.size == 2
    pool.release(a)  # straight to the waiter
    assert await waiter is a and pool.size == 2
    b.close()
    pool.release(b)  # closed: dropped, room for a new one
    c = await pool.acquire()
    assert c is made[2] and len(made) == 3
    cancelled = asyncio.create_task(pool.acquire())
    await asyncio.sleep(0)
    cancelled.cancel()
    pool.release(c)  # the cancelled waiter is skipped: c goes back to the free list
    assert await pool.acquire() is c
    pool.close()
    with pytest.raises(pymysql.err.InterfaceError):
        await pool.acquire()
