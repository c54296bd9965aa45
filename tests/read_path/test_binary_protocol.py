"""SELECT over logical tables in the binary protocol (dumper/server/wire/prepared.py): the
dumper's result sets of server-side prepared statements compared byte for byte with the ones
the DN shards' MariaDB returns for the same statement over the same rows, for every column type
the workloads write and every other type a table may have (`shop.alltypes`); parameters of
every type a client binds; cursors (COM_STMT_FETCH) against MariaDB's own cursor replies."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from cdc.protocol.constants import ColumnType as T
from read_path.values import ColumnDef
from tests.read_path.binary_client import (
    CURSOR_EXISTS,
    LAST_ROW_SENT,
    BinaryClient,
    fields,
    param,
)
from tests.read_path.conftest import ALLTYPE_ROWS as ROWS
from tests.read_path.conftest import READER, shop_shards

pytestmark = pytest.mark.timeout(600)


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
    the row order is the primary key's across shards (compared as sets: a shard's is its own).
    A FLOAT keeps its every bit, though the DNs are read in the text protocol (which prints
    6 digits: 3/7 stored is 0.42857143, printed 0.428571): a binary read's pages read it as
    a DOUBLE."""
    (prepared, columns, rows, _), (s_prepared, s_columns, s_rows) = _both(snap, table)
    assert prepared == s_prepared
    assert columns == s_columns
    assert len(rows) == len(s_rows) > 0
    theirs = {fields(columns, r)[KEYS[table]]: r for r in s_rows}
    for row in rows:
        mine = fields(columns, row)
        expected = fields(columns, theirs[mine[KEYS[table]]])
        assert mine == expected, {k: (v, expected[k]) for k, v in mine.items() if v != expected[k]}


NO_INDEX_USED = 0x0020
KEY_FLAGS = 0x0002 | 0x0004 | 0x0008 | 0x4000  # PRI_KEY, UNIQUE_KEY, MULTIPLE_KEY, PART_KEY


def _keyless(column: bytes) -> ColumnDef:
    col = ColumnDef.parse(column)
    return dataclasses.replace(col, flags=col.flags & ~KEY_FLAGS)


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
    (_, _, rows, _), (_, _, s_rows) = _both(snap, "alltypes", where, params)
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
