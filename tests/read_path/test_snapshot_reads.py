"""SELECT over logical tables through the dumper (docs/snapshot-reads.md), against a real
pipeline: exact snapshots under concurrent transfers, the result sets byte for byte against
the DN shards' own, privileges, and errors that name what is not supported."""

from __future__ import annotations

import asyncio
import time

import pymysql
import pytest

from cdc.protocol.client import MysqlClient
from read_path.values import ColumnDef
from tests.read_path.conftest import (
    ACCOUNTS,
    BALANCE,
    BANK_ONLY,
    NO_ROWS,
    READER,
    shop_shards,
    wrong_answers,
)

pytestmark = pytest.mark.timeout(600)


def rows(snap, sql: str, user=READER) -> tuple[list, tuple]:
    conn = snap.connect(user)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall()), cur.description
    finally:
        conn.close()


def test_whole_table_is_one_moment_under_transfers(snap):
    """Transfers keep the total: a SELECT * whose chunks (16 rows per shard, a watermark each)
    were not all of one moment would see money in flight, counted twice or not at all."""
    for _ in range(6):
        got, _ = rows(snap, "SELECT * FROM bank.accounts")
        ids = [r[0] for r in got]
        assert ids == sorted(ids) == list(range(ACCOUNTS))
        assert sum(r[1] for r in got) == ACCOUNTS * BALANCE
        (count,), _ = rows(snap, "SELECT COUNT(*) FROM bank.accounts")
        assert count == (ACCOUNTS,)
    assert not snap.traffic_errors


def test_where_order_limit_and_aggregates(snap):
    got, desc = rows(
        snap,
        "SELECT id, balance AS b FROM bank.accounts WHERE id BETWEEN 10 AND 200 AND NOT "
        "(id IN (11, 12) OR id >= 150) ORDER BY id LIMIT 5, 20",
    )
    assert [d[0] for d in desc] == ["id", "b"]
    expected = [i for i in range(10, 150) if i not in (11, 12)][5:25]
    assert [r[0] for r in got] == expected
    got, desc = rows(snap, "SELECT MIN(id), MAX(id), COUNT(*) FROM bank.accounts WHERE id > 7")
    assert got == [(8, ACCOUNTS - 1, ACCOUNTS - 8)]
    assert [d[0] for d in desc] == ["MIN(id)", "MAX(id)", "COUNT(*)"]
    got, _ = rows(snap, "SELECT * FROM bank.accounts WHERE updated_at IS NULL AND id < 0")
    assert got == []
    got, _ = rows(snap, "SELECT id FROM bank.accounts LIMIT 0")
    assert got == []


def test_order_by_other_columns_and_the_split_query(snap):
    """ORDER BY columns other than the key (ASC/DESC, several, one not selected; with LIMIT a
    bounded heap) and Flink's split query, all in one snapshot: each agrees with the snapshot's
    rows sorted here."""
    conn = snap.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SELECT id, balance FROM bank.accounts")
            table = list(cur.fetchall())
            by_balance = sorted(table, key=lambda r: (-r[1], r[0]))
            cur.execute("SELECT id, balance FROM bank.accounts ORDER BY balance DESC, id")
            assert list(cur.fetchall()) == by_balance
            cur.execute("SELECT id FROM bank.accounts ORDER BY balance DESC, id DESC LIMIT 3, 7")
            expected = sorted(table, key=lambda r: (-r[1], -r[0]))[3:10]
            assert [r[0] for r in cur.fetchall()] == [r[0] for r in expected]
            cur.execute(
                "SELECT MAX(`id`) FROM (SELECT `id` FROM `bank`.`accounts` WHERE `id` >= 17 "
                "ORDER BY `id` ASC LIMIT 40) AS T"
            )
            assert cur.fetchall() == ((56,),)
            cur.execute(
                "SELECT COUNT(*), MIN(b) FROM (SELECT balance AS b FROM bank.accounts "
                "ORDER BY balance LIMIT 5) AS T"
            )
            assert cur.fetchall() == ((5, min(r[1] for r in table)),)
            cur.execute("COMMIT")
    finally:
        conn.close()


async def _raw(host, port, user, password, sql) -> tuple[list[bytes], list[bytes]]:
    client = await MysqlClient.connect(host, port, user, password)
    try:
        await client.query("SET time_zone = '+00:00'")
        await client.send_command(3, sql.encode())
        first, columns, data, last = await client.read_result()
        assert first[0] not in (0x00, 0xFF), first
        return columns, data
    finally:
        client.close()


@pytest.mark.parametrize("table", ["customers", "orders", "currencies"])
def test_result_sets_byte_for_byte_as_the_shards_send_them(snap, table):
    """Every column type the workloads write (ints, unsigned BIGINT, DECIMAL, ENUM, DATE,
    DATETIME(6), TIMESTAMP, VARCHAR utf8mb4, TEXT, BLOB): column definitions and text rows
    equal the DN's own for the physical shards, but for the names (logical database and table).
    The shop tables are still (only transfers run), so the union of the shards is the table.
    A difference that stays: TIMESTAMPs are sent in UTC whatever the session's time zone."""
    cfg = snap.config
    port = cfg.dumper.port
    columns, data = asyncio.run(
        _raw("127.0.0.1", port, READER[0], READER[1], f"SELECT * FROM shop.{table}")
    )
    shard_rows: list[bytes] = []
    shard_columns: list[bytes] | None = None
    for node, name in shop_shards(cfg, table):
        c, d = asyncio.run(
            _raw(node.host, node.port, node.user, node.password, f"SELECT * FROM shop_p.{name}")
        )
        shard_columns = shard_columns or [
            ColumnDef.parse(p).renamed("shop", table, table).encode() for p in c
        ]
        shard_rows.extend(d)
    assert columns == shard_columns
    assert sorted(data) == sorted(shard_rows)
    assert len(data) > 0


def test_privileges(snap):
    with pytest.raises(pymysql.err.OperationalError) as err:
        rows(snap, "SELECT * FROM bank.accounts", NO_ROWS)
    assert err.value.args[0] == 1142 and "accounts" in err.value.args[1]
    with pytest.raises(pymysql.err.OperationalError) as err:
        rows(snap, "SELECT * FROM shop.customers", BANK_ONLY)
    assert err.value.args[0] == 1142
    got, _ = rows(snap, "SELECT COUNT(*) FROM bank.accounts", BANK_ONLY)
    assert got == [(ACCOUNTS,)]
    grants = {u: rows(snap, "SHOW GRANTS", u)[0] for u in (READER, BANK_ONLY, NO_ROWS)}
    assert grants[READER][0][0].startswith("GRANT SELECT, SHOW DATABASES")
    assert not grants[NO_ROWS][0][0].startswith("GRANT SELECT")
    assert ("GRANT SELECT ON `bank`.* TO 'banker'@'%'",) in grants[BANK_ONLY]


@pytest.mark.parametrize(
    ("sql", "code", "says"),
    [
        ("SELECT * FROM bank.accounts a JOIN bank.accounts b ON a.id = b.id", 1235, "join"),
        ("SELECT * FROM (SELECT id FROM bank.accounts LIMIT 3) AS T", 1235, "derived"),
        ("SELECT UPPER(id) FROM bank.accounts", 1235, "UPPER()"),
        ("SELECT * FROM bank.accounts ORDER BY 2", 1235, "ORDER BY"),
        ("SELECT * FROM bank.nope", 1146, "bank.nope"),
        ("SELECT nope FROM bank.accounts", 1054, "nope"),
        ("SELECT * FROM accounts", 1046, "No database"),
        ("UPDATE bank.accounts SET balance = 0", 1064, "UPDATE"),
        ("SELECT * FROM bank.accounts WHERE", 1064, ""),
    ],
)
def test_errors_keep_the_connection(snap, sql, code, says):
    conn = snap.connect()
    try:
        with conn.cursor() as cur:
            with pytest.raises(pymysql.err.MySQLError) as err:
                cur.execute(sql)
            assert err.value.args[0] == code
            assert says in err.value.args[1]
            cur.execute("SELECT COUNT(*) FROM bank.accounts")
            assert cur.fetchall() == ((ACCOUNTS,),)
    finally:
        conn.close()


# Issue 32 item 7: what a snapshot read does not do, each refused naming the construct (1235,
# or 1064 quoting the text it did not parse), on one connection that stays usable.
BAD_INPUT = [
    ("SELECT * FROM bank.accounts a JOIN bank.accounts b ON a.id = b.id", 1235, "a join"),
    ("SELECT * FROM bank.accounts a LEFT JOIN shop.orders o USING (id)", 1235, "a join"),
    ("SELECT * FROM bank.accounts, shop.orders", 1235, "a join"),
    ("SELECT * FROM bank.accounts WHERE id IN (SELECT id FROM shop.orders)", 1235, "subquery"),
    ("SELECT * FROM bank.accounts WHERE (SELECT 1) = 1", 1235, "subquery"),
    ("SELECT (SELECT 1) FROM bank.accounts", 1235, "subquery"),
    ("SELECT * FROM (SELECT * FROM bank.accounts) AS t", 1235, "derived table"),
    ("SELECT id FROM (SELECT id FROM bank.accounts LIMIT 5) AS t", 1235, "derived table"),
    ("SELECT * FROM bank.accounts UNION SELECT * FROM bank.accounts", 1235, "UNION"),
    ("SELECT COUNT(DISTINCT id) FROM bank.accounts", 1235, "COUNT of anything"),
    ("SELECT SUM(balance) FROM bank.accounts", 1235, "SUM()"),
    ("SELECT CONCAT(id, 'x') FROM bank.accounts", 1235, "CONCAT()"),
    ("SELECT * FROM bank.accounts WHERE ABS(balance) > 1", 1235, "ABS()"),
    ("SELECT * FROM bank.accounts WHERE balance + 1 > 2", 1235, "arithmetic"),
    ("SELECT id, COUNT(*) FROM bank.accounts GROUP BY id", 1235, "beside aggregates"),
    ("SELECT COUNT(*) FROM bank.accounts GROUP BY id", 1235, "GROUP BY"),
    ("SELECT * FROM bank.accounts FOR UPDATE", 1235, "locking read"),
    ("SELECT * FROM bank.accounts LOCK IN SHARE MODE", 1235, "locking read"),
    ("SELECT * FROM bank.accounts INTO OUTFILE '/tmp/x'", 1235, "INTO"),
    ("LOCK TABLES bank.accounts WRITE", 1235, "WRITE"),
    ("INSERT INTO bank.accounts (id) VALUES (1)", 1064, "INSERT INTO"),
    ("UPDATE bank.accounts SET balance = 0", 1064, "UPDATE"),
    ("DELETE FROM bank.accounts", 1064, "DELETE"),
    ("REPLACE INTO bank.accounts (id) VALUES (1)", 1064, "REPLACE"),
    ("TRUNCATE TABLE bank.accounts", 1064, "TRUNCATE"),
    ("DROP TABLE bank.accounts", 1064, "DROP"),
    ("CREATE TABLE bank.x (id INT)", 1064, "CREATE"),
    ("ALTER TABLE bank.accounts ADD COLUMN y INT", 1064, "ALTER"),
]


def test_bad_input_is_refused_naming_the_construct(snap):
    conn = snap.connect()
    try:
        with conn.cursor() as cur:
            assert wrong_answers(cur, BAD_INPUT) == []
            cur.execute("SELECT COUNT(*) FROM bank.accounts")
            assert cur.fetchall() == ((ACCOUNTS,),)
    finally:
        conn.close()


def test_streamed_with_unbuffered_cursor(snap):
    """SSCursor reads rows as they arrive; stopping half way and closing is clean."""
    conn = snap.connect(cursorclass=pymysql.cursors.SSCursor)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM bank.accounts")
            first = [cur.fetchone() for _ in range(10)]
            assert [r[0] for r in first] == list(range(10))
    finally:
        conn.close()
    got, _ = rows(snap, "SELECT COUNT(*) FROM bank.accounts")
    assert got == [(ACCOUNTS,)]


def test_consistent_snapshot_pins_a_position(snap):
    """Inside START TRANSACTION WITH CONSISTENT SNAPSHOT: SHOW MASTER STATUS and @@gtid_executed
    stay at P while transfers go on, every read is the tables at P (twice the same rows), the
    lock and savepoint statements mariadb-dump and Debezium send are answered; COMMIT unpins."""
    conn = snap.connect()
    try:
        with conn.cursor() as cur:
            for sql in (
                "FLUSH /*!40101 LOCAL */ TABLES",
                "FLUSH TABLES WITH READ LOCK",
                "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
                "START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */",
            ):
                cur.execute(sql)
            cur.execute("SHOW MASTER STATUS")
            pinned = cur.fetchone()
            cur.execute("SELECT @@gtid_executed")
            gtids = cur.fetchone()
            cur.execute("UNLOCK TABLES")
            cur.execute("LOCK TABLES bank.accounts READ LOCAL")
            cur.execute("SAVEPOINT sp")
            cur.execute("SELECT * FROM bank.accounts")
            first = cur.fetchall()
            cur.execute("ROLLBACK TO SAVEPOINT sp")
            cur.execute("RELEASE SAVEPOINT sp")
            cur.execute("SELECT * FROM bank.accounts")
            second = cur.fetchall()
            cur.execute("SHOW MASTER STATUS")
            assert cur.fetchone() == pinned
            cur.execute("SELECT @@gtid_executed")
            assert cur.fetchone() == gtids
            assert first == second
            assert sum(r[1] for r in first) == ACCOUNTS * BALANCE
            cur.execute("COMMIT")
            deadline = 60
            while deadline:
                cur.execute("SHOW MASTER STATUS")
                if cur.fetchone() != pinned:
                    break
                deadline -= 1
                time.sleep(0.5)
            assert deadline, "SHOW MASTER STATUS stayed pinned after COMMIT"
            with pytest.raises(pymysql.err.MySQLError) as err:
                cur.execute("LOCK TABLES bank.accounts WRITE")
            assert err.value.args[0] == 1235
    finally:
        conn.close()


def test_reads_while_nothing_is_written(snap):
    """With no transaction coming, the global binlog gets no CTS mark past a chunk's high
    watermark: the leader's merged TSO (moved by heartbeats) tells every chunk it may go on."""
    snap.stop_traffic()
    try:
        time.sleep(1)
        started = time.monotonic()
        got, _ = rows(snap, "SELECT * FROM bank.accounts")
        took = time.monotonic() - started
    finally:
        snap.start_traffic()
    assert len(got) == ACCOUNTS and sum(r[1] for r in got) == ACCOUNTS * BALANCE
    assert took < 20, f"{took:.1f} s for a few chunks: waited out the watermark?"
