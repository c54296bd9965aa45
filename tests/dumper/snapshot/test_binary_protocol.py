"""SELECT over logical tables in the binary protocol (dumper/server/wire/prepared.py): the
dumper's result sets of server-side prepared statements compared byte for byte with the ones
the DN shards' MariaDB returns for the same statement over the same rows, for every column type
the workloads write and every other type a table may have (`shop.alltypes`); parameters of
every type a client binds; cursors (COM_STMT_FETCH) against MariaDB's own cursor replies."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import time
import warnings

import pymysql
import pytest

from cdc.protocol.constants import ColumnType as T
from cn import ComputeNode
from dumper.server.snapshot.values import ColumnDef
from tests.dumper.snapshot.binary_client import (
    CURSOR_EXISTS,
    LAST_ROW_SENT,
    BinaryClient,
    fields,
    param,
)
from tests.dumper.snapshot.conftest import READER, shop_shards

pytestmark = pytest.mark.timeout(600)

ALLTYPES = (
    "CREATE TABLE IF NOT EXISTS shop.alltypes (id BIGINT NOT NULL PRIMARY KEY, ti TINYINT, "
    "tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED, "
    "i INT, iu INT UNSIGNED, bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dc DECIMAL(20,6), dd DATE, "
    "dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME, tm6 TIME(6), y YEAR, b BIT(10), "
    "c CHAR(4), vc VARCHAR(32) CHARACTER SET utf8mb4, tx TEXT, bl BLOB, vb VARBINARY(8), "
    "e ENUM('a','b'), st SET('x','y','z'), j JSON)"
)
COLUMNS = (
    "id, ti, tu, si, su, mi, mu, i, iu, bu, f, d, dc, dd, dt, dt6, ts, tm, tm6, y, b, c, vc, tx, "
    "bl, vb, e, st, j"
)
ROWS = [
    "(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
    "18446744073709551615, 1.5, 0.1, -12345678901234.123456, '1000-01-01', "
    "'2026-01-01 00:00:00', '2026-11-25 10:20:30.000001', '1970-01-01 00:00:01.500', "
    "'-838:59:59', '25:00:00.5', 1901, 682, 'ab', 'héllo ☃', 'text', 'blob\\0x', 'vb', 'a', "
    "'x,z', '{\"a\": [1, 2]}')",
    "(2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 0, -3.4e38, 1e-300, 0, '9999-12-31', "
    "'9999-12-31 23:59:59', '2000-02-29 00:00:00.000000', '2038-01-19 03:14:07.999', "
    "'00:00:00', '-00:00:01.000001', 2155, 0, '', '', '', '', '', 'b', '', '[]')",
]
ROWS += [
    f"({i}, {i % 100}, {i % 200}, {i * 7}, {i}, {i * 1000}, {i}, {i * 99991}, {i}, {i * 10**12}, "
    f"{i / 7}, {i / 3}, {i}.{i:06d}, '2020-{1 + i % 12:02d}-{1 + i % 28:02d}', "
    f"'2021-03-04 05:06:{i % 60:02d}', '2022-01-01 00:00:00.{i:06d}', NULL, "
    f"'{i % 24:02d}:{i % 60:02d}:00', '{i:02d}:00:01.{i:06d}', {1901 + i}, {i}, 'c{i}', "
    f"'v{i}', 't{i}', 'b{i}', 'x{i}', 'a', 'y', '{{\"i\": {i}}}')"
    for i in range(3, 40)
]


async def _create_alltypes(cfg) -> None:
    cn = ComputeNode(cfg)
    await cn.start()
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        await cn.execute_ddl(ALLTYPES, shard_key="id", partitions=4)
        async with cn.transaction() as tx:
            await tx.execute(f"INSERT INTO shop.alltypes ({COLUMNS}) VALUES {', '.join(ROWS)}")
    finally:
        await cn.close()


@pytest.fixture(scope="module")
def alltypes(snap):
    """shop.alltypes, once its rows are in the global binlog (a read sees them)."""
    asyncio.run(asyncio.wait_for(_create_alltypes(snap.config), 120))
    deadline = time.monotonic() + 60
    while True:
        conn = snap.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM shop.alltypes")
                if cur.fetchone()[0] == len(ROWS):
                    return "alltypes"
        finally:
            conn.close()
        assert time.monotonic() < deadline, "shop.alltypes did not reach the global binlog"
        time.sleep(0.3)


async def _run(host, port, user, password, sql, params, cursor_fetch=None):
    """PREPARE + EXECUTE (+ FETCH by `cursor_fetch` rows until the last): the column
    definitions announced at PREPARE, those of the result, the rows, and for a cursor the
    (rows, status) of each reply."""
    client = await BinaryClient.connect(host, port, user, password)
    try:
        stmt = await client.prepare(sql)
        assert stmt.params == len(params)
        result = await client.execute(stmt, params, cursor=cursor_fetch is not None)
        replies = [(0, result.status)]
        rows = result.rows
        if cursor_fetch is not None:
            assert result.status & CURSOR_EXISTS
            while not replies[-1][1] & LAST_ROW_SENT:
                got = await client.fetch(stmt, cursor_fetch)
                rows += got.rows
                replies.append((len(got.rows), got.status))
        await client.close_statement(stmt)
        return stmt.columns, result.columns, rows, replies
    finally:
        client.close()


def _both(snap, table: str, where: str = "", params=(), cursor_fetch=None, items: str = "*"):
    """The dumper's answer for the logical table, and the shards' answers joined."""
    port = snap.config.dumper.port
    mine = asyncio.run(
        _run(
            "127.0.0.1",
            port,
            *READER,
            f"SELECT {items} FROM shop.{table}{where}",
            list(params),
            cursor_fetch,
        )
    )
    prepared, columns, rows = None, None, []
    for node, name in shop_shards(snap.config, table):
        p, c, r, _ = asyncio.run(
            _run(
                node.host,
                node.port,
                node.user,
                node.password,
                f"SELECT {items} FROM shop_p.{name}{where}",
                list(params),
            )
        )

        def logical(defs):
            return [ColumnDef.parse(d).renamed("shop", table, table).encode() for d in defs]

        prepared, columns = prepared or logical(p), columns or logical(c)
        rows += r
    return mine, (prepared, columns, rows)


@pytest.mark.parametrize("table", ["customers", "orders", "order_events", "currencies", "alltypes"])
def test_binary_result_sets_byte_for_byte_as_the_shards_send_them(snap, alltypes, table):
    """Column definitions at PREPARE and at EXECUTE, and every binary row, equal the DN's own
    for its shards but for the names (logical database and table). Differences that stay:
    TIMESTAMPs are in UTC whatever the session's time zone (the read's DN sessions are), and
    the row order is the primary key's across shards (compared as sets: a shard's is its own);
    a FLOAT is the float nearest its text (6 significant digits): the rows are read from the
    DNs in the text protocol, which prints a FLOAT with 6 digits, so its last bits are gone
    (3/7 stored is 0.42857143, printed 0.428571). DOUBLE keeps every bit (17 digits)."""
    (prepared, columns, rows, _), (s_prepared, s_columns, s_rows) = _both(snap, table)
    assert prepared == s_prepared
    assert columns == s_columns
    assert len(rows) == len(s_rows) > 0
    theirs = {fields(columns, r)[KEYS[table]]: r for r in s_rows}
    for row in rows:
        mine = fields(columns, row)
        expected = fields(columns, theirs[mine[KEYS[table]]])
        if expected.get("f") is not None and table == "alltypes":
            expected["f"] = _float_as_text_reads_it(expected["f"])
        assert mine == expected, {k: (v, expected[k]) for k, v in mine.items() if v != expected[k]}


def _float_as_text_reads_it(value: bytes) -> bytes:
    """A binary FLOAT as the text protocol's 6 digits give it back."""
    (f,) = struct.unpack("<f", value)
    return struct.pack("<f", float(f"{f:.6g}"))


NO_INDEX_USED = 0x0020
KEY_FLAGS = 0x0002 | 0x0004 | 0x0008 | 0x4000  # PRI_KEY, UNIQUE_KEY, MULTIPLE_KEY, PART_KEY


def _keyless(column: bytes) -> ColumnDef:
    col = ColumnDef.parse(column)
    return dataclasses.replace(col, flags=col.flags & ~KEY_FLAGS)


NOT_FLOAT = COLUMNS.replace(" f,", "")  # the FLOAT's difference is the test above's
KEYS = {"customers": "id", "orders": "id", "order_events": "id", "currencies": "code"}
KEYS["alltypes"] = "id"
DATE = bytes.fromhex("e4070301")  # 2020-03-01 as a binary DATE (year LE, month, day)


@pytest.mark.parametrize(
    ("where", "params"),
    [
        (" WHERE id BETWEEN ? AND ?", [param(T.LONGLONG, 3), param(T.TINY, 20)]),
        (" WHERE i > ? AND iu < ?", [param(T.LONG, 99991 * 10), param(T.LONGLONG, 30)]),
        (" WHERE d >= ? OR f < ?", [param(T.DOUBLE, 4.5), param(T.FLOAT, 1.0)]),
        (" WHERE dc >= ?", [param(T.NEWDECIMAL, "12.000012")]),
        (" WHERE vc = ? OR c = ?", [param(T.VAR_STRING, "v7"), param(T.STRING, "c9")]),
        (" WHERE dd >= ?", [param(T.DATE, DATE)]),
        (
            " WHERE dt6 < ?",
            [param(T.DATETIME, bytes.fromhex("e6070101000000") + (20).to_bytes(4, "little"))],
        ),
        (" WHERE tm >= ?", [param(T.TIME, bytes.fromhex("00000000000a0000"))]),
        (" WHERE id = ? OR id IN (?, 5)", [param(T.NULL, None), param(T.LONGLONG, 4)]),
        (" WHERE vc IS NULL OR e = ?", [param(T.VAR_STRING, "b")]),
    ],
    ids=[
        "ints",
        "int-unsigned",
        "doubles",
        "decimal",
        "strings",
        "date",
        "datetime",
        "time",
        "null",
        "enum",
    ],
)
def test_parameters_of_every_type(snap, alltypes, where, params):
    """`?` bound from COM_STMT_EXECUTE's binary values (ints, doubles, a decimal, strings,
    DATE/DATETIME/TIME, NULL) selects the rows MariaDB selects with the same parameters."""
    (_, _, rows, _), (_, _, s_rows) = _both(snap, "alltypes", where, params, items=NOT_FLOAT)
    assert sorted(rows) == sorted(s_rows)
    assert rows, "a statement that selects nothing tests little"


@pytest.mark.parametrize("fetch", [1, 7, 100])
def test_cursor_fetch_as_mariadb_answers_it(snap, alltypes, fetch):
    """CURSOR_TYPE_READ_ONLY: the metadata ends with CURSOR_EXISTS and no row; each FETCH sends
    up to its count, with CURSOR_EXISTS while the end is not found, and the fetch that finds it
    says LAST_ROW_SENT — the same replies, row counts and bytes as MariaDB's own cursor over one
    shard holding the same rows (shop.currencies is a broadcast table: one copy is the table).
    Differences that stay: MariaDB's SERVER_QUERY_NO_INDEX_USED (its optimizer's note that it
    scans the table) is not set by the dumper, which has no plan to report; MariaDB
    materialises a cursor's rows in a temporary table, whose column definitions lose the key
    flags (PRI_KEY, PART_KEY, ...) its plain result has: the dumper's cursor keeps the plain
    result's definitions (equal to MariaDB's, the test above), as it holds no copy."""
    (_, columns, rows, replies), _ = _both(snap, "currencies", cursor_fetch=fetch)
    (node, name), *_ = shop_shards(snap.config, "currencies")
    _, s_columns, s_rows, s_replies = asyncio.run(
        _run(
            node.host,
            node.port,
            node.user,
            node.password,
            f"SELECT * FROM shop_p.{name}",
            [],
            fetch,
        )
    )
    assert replies == [(n, status & ~NO_INDEX_USED) for n, status in s_replies]
    assert rows == s_rows
    assert [_keyless(c).renamed("shop", "currencies", "currencies") for c in s_columns] == [
        _keyless(c) for c in columns
    ]


def test_cursor_of_a_sharded_table_and_statements_around_it(snap, alltypes):
    """A cursor over a sharded table gives every row once in key order, as the same SELECT
    without a cursor; other statements run on the session between its fetches; FETCH with no
    open cursor is MariaDB's 1421."""

    async def run():
        client = await BinaryClient.connect("127.0.0.1", snap.config.dumper.port, *READER)
        try:
            stmt = await client.prepare("SELECT id, vc, dt6 FROM shop.alltypes WHERE id >= ?")
            whole = await client.execute(stmt, [param(T.LONGLONG, 0)])
            await client.execute(stmt, [param(T.LONGLONG, 0)], cursor=True)
            rows = []
            while True:
                got = await client.fetch(stmt, 5)
                rows += got.rows
                assert (await client.client.query("SELECT 1")).rows == [("1",)]
                if got.status & LAST_ROW_SENT:
                    break
            with pytest.raises(Exception, match="1421"):
                await client.fetch(stmt, 5)
            return whole.rows, rows
        finally:
            client.close()

    whole, rows = asyncio.run(run())
    assert rows == whole
    assert len(rows) == len(ROWS)
