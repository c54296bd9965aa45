"""Reads as of past points (issue 42, docs/snapshot-reads.md "As of a past point"), on the real
pipeline of `snap` (transfers running, the orders tables, pages of 16 rows), against an
independent oracle: a MariaDB replica of the dumper stopped at each point with `START SLAVE
UNTIL`. The history between the points has transfers, inserts, updates and deletes of a table
of this test, and an ADD COLUMN on it; each point is named in another form (file:pos, TSO,
GTID, TIMESTAMP), and every table the replica holds there is compared row for row (and its
digest printed) with the dumper's read as of the point: a read as of a point before the ADD
COLUMN answers in the table's shape there, one before a DROP COLUMN, a DROP TABLE or a
TRUNCATE is refused naming it."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import re
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import pymysql
import pytest

from cdc_equipment.cn import ComputeNode
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import throwaway_server
from history import RetainedFiles
from tests.dumper.test_replica import _query, _slave_status
from tests.read_path.conftest import ACCOUNTS, BALANCE, wrong_answers
from tests.read_path.test_mariadb_dump import load_dump

pytestmark = [pytest.mark.timeout(900)]

NOTES = "shop.asof_notes"
GONE = "shop.asof_gone"  # dropped after the first two points
EMPTIED = "shop.asof_emptied"  # truncated after the first two points
NARROWED = "shop.asof_narrowed"  # a column dropped after the first two points
# Values as the server spells them (no decoding; the encoders pymysql needs for its own SETs).
AS_SENT = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}
DDL = f"ALTER TABLE {NOTES} ADD COLUMN note VARCHAR(20) NULL"
WIDEN = f"ALTER TABLE {NOTES} MODIFY n BIGINT NULL, MODIFY s VARCHAR(24)"  # crossed too
AGGREGATES = f"SELECT COUNT(*), MIN(n), MAX(s) FROM {NOTES}"


def _cn(cfg, *statements: str, ddl: tuple[str, ...] = ()) -> None:
    async def run() -> None:
        cn = ComputeNode(cfg)
        await cn.start()
        warnings.simplefilter("ignore", pymysql.Warning)
        try:
            for sql in ddl:
                if sql.startswith("CREATE"):
                    await cn.execute_ddl(sql, shard_key="id", partitions=4)
                else:
                    await cn.execute_ddl(sql)
            for sql in statements:
                async with cn.transaction() as tx:
                    await tx.execute(sql)
        finally:
            await cn.close()

    asyncio.run(asyncio.wait_for(run(), 180))


# What refuses a read as of a point before it: the DDL named (an ADD COLUMN refuses nothing:
# NOTES is read in its shape at the point).
REFUSED = {
    GONE: "DROP TABLE",
    EMPTIED: "TRUNCATE TABLE",
    NARROWED: "DROP COLUMN gone",
}
# What the refusal says the DDL did (the schema history's shapes before and after it).
WHY = {EMPTIED: "it emptied the table", NARROWED: "it dropped (or renamed) column gone"}


def _ids(start: int, stop: int, step: int = 1) -> str:
    """`(a, b, …)`: the CN routes a write on a partitioned table by its keys, never scatters."""
    return "(" + ", ".join(str(i) for i in range(start, stop, step)) + ")"


def _raw(conn: pymysql.Connection, sql: str) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return sorted(cur.fetchall(), key=repr)


def _columns(conn: pymysql.Connection, sql: str) -> tuple[list[tuple], list[tuple]]:
    """The result's columns as pymysql describes them (name, type, length, decimals, null),
    and its rows."""
    with conn.cursor() as cur:
        cur.execute(sql)
        rows = sorted(cur.fetchall(), key=repr)
        return list(cur.description), rows


def _digest(rows: list[tuple]) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:12]


def _served(snap, sql: str, want) -> None:
    """Until the dumper's read at the end answers `want` (what the CN wrote is served)."""
    deadline = time.monotonic() + 60
    while True:
        conn = snap.connect()
        try:
            with conn.cursor() as cur:
                try:
                    cur.execute(sql)
                    if cur.fetchall() == want:
                        return
                except pymysql.err.MySQLError:
                    pass
        finally:
            conn.close()
        assert time.monotonic() < deadline, f"{sql} never answered {want}"
        time.sleep(0.3)


def _end(snap) -> tuple[str, int]:
    conn = snap.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            return row[0], int(row[1])
    finally:
        conn.close()


def _history(snap) -> list[tuple[str, bool]]:
    """Writes a history and returns its points: (the point as AS OF writes it, whether the
    DDL on NOTES is after it)."""
    cfg = snap.config
    binlog = Path(cfg.dumper.binlog_dir)
    _cn(
        cfg,
        f"INSERT INTO {NOTES} (id, n, s) VALUES "
        + ", ".join(f"({i}, {i * 10}, 's{i}')" for i in range(60)),
        f"INSERT INTO {GONE} (id, n) VALUES (1, 1), (2, 2), (3, 3)",
        f"INSERT INTO {EMPTIED} (id, n) VALUES (1, 1), (2, 2), (3, 3)",
        f"INSERT INTO {NARROWED} (id, n, gone) VALUES (1, 1, 'a'), (2, 2, 'b'), (3, 3, 'c')",
        ddl=(
            f"CREATE TABLE {NOTES} (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL, s VARCHAR(16))",
            f"CREATE TABLE {GONE} (id BIGINT NOT NULL PRIMARY KEY, n INT)",
            f"CREATE TABLE {EMPTIED} (id BIGINT NOT NULL PRIMARY KEY, n INT)",
            f"CREATE TABLE {NARROWED} (id BIGINT NOT NULL PRIMARY KEY, n INT, gone CHAR(1))",
        ),
    )
    _served(snap, f"SELECT COUNT(*) FROM {NOTES}", ((60,),))
    points = []
    file, pos = _end(snap)
    points.append((f"'{file}':{pos}", True))
    _cn(
        cfg,
        f"UPDATE {NOTES} SET n = n + 1 WHERE id IN {_ids(0, 30)}",
        f"DELETE FROM {NOTES} WHERE id IN {_ids(50, 60)}",
    )
    time.sleep(2)  # transfers
    _served(snap, f"SELECT COUNT(*) FROM {NOTES}", ((50,),))
    points.append((f"TSO {RetainedFiles(binlog).end_point().tso}", True))
    time.sleep(1)
    _cn(
        cfg,
        f"UPDATE {NOTES} SET s = 'changed' WHERE id IN {_ids(0, 50, 3)}",
        f"UPDATE {NARROWED} SET n = 20 WHERE id IN (2)",
        ddl=(
            DDL,
            WIDEN,
            f"DROP TABLE {GONE}",
            f"TRUNCATE TABLE {EMPTIED}",
            f"ALTER TABLE {NARROWED} DROP COLUMN gone",
        ),
    )
    _cn(
        cfg,
        f"UPDATE {NOTES} SET note = 'after' WHERE id IN {_ids(0, 10)}",
        f"UPDATE {NOTES} SET n = 5000000000, s = 'twenty-four characters!' WHERE id IN (40, 41)",
    )
    _served(snap, f"SELECT COUNT(*) FROM {NOTES} WHERE note = 'after'", ((10,),))
    conn = snap.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@gtid_executed")
            executed = cur.fetchone()[0]
    finally:
        conn.close()
    uuid, last = re.fullmatch(r"([0-9a-f-]+):1-(\d+)", executed).groups()  # type: ignore[union-attr]
    points.append((f"GTID '{uuid}:{last}'", False))
    _cn(cfg, f"INSERT INTO {NOTES} (id, n, s, note) VALUES (100, 1, 'x', 'new')")
    time.sleep(2)
    points.append((f"TIMESTAMP '{dt.datetime.now():%Y-%m-%d %H:%M:%S.%f}'", False))
    time.sleep(1)
    _cn(
        cfg,
        f"DELETE FROM {NOTES} WHERE id IN {_ids(0, 5)}",
        f"UPDATE {NOTES} SET note = 'last' WHERE id IN {_ids(5, 50)}",
    )
    return points


@pytest.fixture
def replica(tmp_path):
    server = throwaway_server(tmp_path, server_id=7777, name="asof-replica")
    try:
        yield server
    finally:
        server.stop()


def _read_as_of(snap, point: str, tables: list[str]) -> tuple[tuple[str, int], dict]:
    """The point's position (SHOW MASTER STATUS inside START TRANSACTION READ ONLY AS OF it)
    and each table's rows as of it (or the error)."""
    conn = snap.connect(conv=AS_SENT)  # values as the server spells them
    try:
        with conn.cursor() as cur:
            cur.execute(f"START TRANSACTION READ ONLY AS OF {point}")
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
            out: dict[str, object] = {}
            for table in tables:
                try:
                    out[table] = _raw(conn, f"SELECT * FROM {table}")
                except pymysql.err.MySQLError as err:
                    out[table] = err.args
            cur.execute("COMMIT")
            # The single-statement form reads the same.
            assert _raw(conn, f"SELECT * FROM bank.accounts AS OF {point}") == out["bank.accounts"]
            return (file, int(pos)), out
    finally:
        conn.close()


def _stop_at(conn, position: tuple[str, int], dumper) -> None:
    """The replica's SQL thread run up to `position` (START SLAVE UNTIL), and stopped there:
    UNTIL stops it at the first event past the position, so at the binlog's end (nothing
    past it yet) it is stopped once it stands there."""
    file, pos = position
    _query(conn, f"START SLAVE SQL_THREAD UNTIL MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}")
    deadline = time.monotonic() + 120
    while True:
        status = _slave_status(conn)
        assert status.get("Last_SQL_Error", "") == "", status
        if status["Slave_SQL_Running"] == "No":
            assert _there(status, position, dumper), status
            return
        if _there(status, position, dumper):
            _query(conn, "STOP SLAVE SQL_THREAD")
            return
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


def _there(status: dict, position: tuple[str, int], dumper) -> bool:
    """Whether the replica has executed up to `position`: there, or (MariaDB stops after the
    transaction's XID, before the CTS mark that ends it in the global binlog: a comment event,
    no data between the two) at that mark."""
    file, pos = position
    at = (status["Relay_Master_Log_File"], int(status["Exec_Master_Log_Pos"]))
    if at == position:
        return True
    if at[0] != file or at[1] >= pos:
        return False
    rest = _raw(dumper, f"SHOW BINLOG EVENTS IN '{file}' FROM {at[1]} LIMIT 1")
    return bool(rest) and int(rest[0][4]) == pos and "CTS::" in str(rest[0][5])


def test_reads_as_of_points_equal_a_replica_stopped_there(snap, replica):
    points = _history(snap)
    conn = replica.connect(conv=AS_SENT)  # values as the server spells them, as the dumper's
    try:
        first = _raw(snap.connect(), "SHOW BINARY LOGS")[0][0]
        _query(
            conn,
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={snap.config.dumper.port}, "
            f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}', "
            f"MASTER_LOG_FILE='{first}', MASTER_LOG_POS=4",
        )
        _query(conn, "START SLAVE IO_THREAD")
        compared = []
        for point, before_ddl in points:
            tables = []
            for db in ("bank", "shop"):
                tables += [f"{db}.{t}" for (t,) in _raw(snap.connect(), f"SHOW TABLES FROM {db}")]
            position, dumper = _read_as_of(snap, point, tables)
            _stop_at(conn, position, snap.connect())
            oracle_tables = {
                f"{db}.{t}"
                for db in ("bank", "shop")
                for (t,) in _raw(conn, f"SHOW TABLES FROM {db}")
            }
            for table in sorted(oracle_tables):
                if table in dumper:
                    got = dumper[table]
                else:  # not there now (dropped since the point)
                    try:
                        got = _raw(
                            snap.connect(conv=AS_SENT), f"SELECT * FROM {table} AS OF {point}"
                        )
                    except pymysql.err.MySQLError as err:
                        got = err.args
                if before_ddl and table in REFUSED:
                    # Refused naming the DDL after the point and where it is.
                    code, message = got  # type: ignore[misc]
                    assert code == 1412 and REFUSED[table] in message, got
                    assert WHY.get(table, "") in message, got
                    assert re.search(r"binlog\.\d+:\d+", message), message
                    continue
                want = _raw(conn, f"SELECT * FROM {table}")
                assert got == want, (point, position, table)
                if table == NOTES:  # the same columns (before the ADD COLUMN: not `note`;
                    # before the MODIFY: INT and VARCHAR(16)), described the same
                    for sql in (f"SELECT * FROM {table}", AGGREGATES):
                        ours = _columns(snap.connect(conv=AS_SENT), f"{sql} AS OF {point}")
                        assert ours == _columns(conn, sql), (point, sql, ours)
                compared.append((point, table, len(want), _digest(want)))
        print("\n".join(f"{p}: {t} {n} rows, digest {d}" for p, t, n, d in compared))
        assert {p for p, *_ in compared} == {p for p, _ in points}
        assert len(compared) >= 4 * 5
        assert {(p, t) for p, t, *_ in compared if t in REFUSED} == {
            (p, t) for p, before in points if not before for t in (EMPTIED, NARROWED)
        }
        # NOTES as of every point, before the ADD COLUMN in its shape there, as the replica.
        assert {p for p, t, *_ in compared if t == NOTES} == {p for p, _ in points}
        # A prepared statement announces that shape at PREPARE too (EXECUTE sends it).
        first_point = points[0][0]
        assert _prepared(snap, f"SELECT * FROM {NOTES} AS OF {first_point}") == (3, 3, 60)
    finally:
        _query(conn, "STOP SLAVE")
        conn.close()


def _prepared(snap, sql: str) -> tuple[int, int, int]:
    """`sql` prepared: (the columns PREPARE announces, those EXECUTE sends, its rows)."""
    from tests.read_path.binary_client import BinaryClient
    from tests.read_path.conftest import READER

    async def run() -> tuple[int, int, int]:
        client = await BinaryClient.connect("127.0.0.1", snap.config.dumper.port, *READER)
        try:
            stmt = await client.prepare(sql)
            result = await client.execute(stmt)
            return len(stmt.columns), len(result.columns), len(result.rows)
        finally:
            client.close()

    return asyncio.run(asyncio.wait_for(run(), 60))


@pytest.mark.skipif(shutil.which("mariadb-dump") is None, reason="mariadb-dump missing")
def test_a_dump_of_a_past_state_seeds_a_replica_there(snap, replica):
    """`SET GLOBAL cdc_read_as_of` for a tool that cannot write AS OF: `mariadb-dump
    --single-transaction --master-data=1` dumps the state of a past point under transfers (its
    balances sum to the total) and prints that point's position; a replica loaded from the
    dump and started there, stopped at the binlog's end, holds every table as the dumper reads
    it at the end. (Not `cdc check`: its token table, created once, would be missing from the
    later dumps of the package's other tests, which dump bank and shop only.)"""
    position = _end(snap)
    time.sleep(3)  # transfers after the point
    port = snap.config.dumper.port
    login = ["-h127.0.0.1", f"-P{port}", f"-u{DEFAULT_USER}", f"-p{DEFAULT_PASSWORD}"]
    admin = pymysql.connect(
        host="127.0.0.1", port=port, user=DEFAULT_USER, password=DEFAULT_PASSWORD, autocommit=True
    )
    try:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL cdc_read_as_of = %s", (f"'{position[0]}':{position[1]}",))
        dump = subprocess.run(
            ["mariadb-dump", "--single-transaction", "--master-data=1", "--databases", "bank"]
            + ["shop", *login],
            capture_output=True,
            timeout=300,
        )
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL cdc_read_as_of = ''")
        admin.close()
    assert dump.returncode == 0, dump.stderr.decode(errors="replace")
    text = dump.stdout.decode(errors="replace")
    printed = re.search(r"CHANGE MASTER TO MASTER_LOG_FILE='([^']+)', MASTER_LOG_POS=(\d+)", text)
    assert printed and (printed[1], int(printed[2])) == position, text[:2000]
    accounts = text.split("INSERT INTO `accounts` VALUES")[1].split(";\n", 1)[0]
    assert sum(int(b) for b in re.findall(r"\(\d+,(-?\d+),", accounts)) == ACCOUNTS * BALANCE

    conn = replica.connect(conv=AS_SENT)
    try:
        load_dump(conn, replica, port, dump.stdout)
        _query(conn, "START SLAVE IO_THREAD")
        snap.stop_traffic()  # the end stays where the replica stops
        try:
            time.sleep(1)  # the last transfers reach the global binlog
            end = _end(snap)
            _stop_at(conn, end, snap.connect())
            dumper = snap.connect(conv=AS_SENT)
            for db in ("bank", "shop"):
                for (table,) in _raw(conn, f"SHOW TABLES FROM {db}"):
                    sql = f"SELECT * FROM {db}.{table}"
                    assert _raw(dumper, sql) == _raw(conn, sql), (db, table)
        finally:
            snap.start_traffic()
    finally:
        _query(conn, "STOP SLAVE")
        conn.close()


def _in_the_future() -> int:
    from cdc import tso_layout

    return tso_layout.compose(int(time.time() * 1000) + 3_600_000, 0)


# (statement, MySQL error code, what the message says): each refused, the connection usable.
BAD_POINTS = [
    ("SELECT * FROM bank.accounts AS OF 12345", 1525, "ambiguous"),
    ("SELECT * FROM bank.accounts AS OF TSO x", 1525, "malformed"),
    ("SELECT * FROM bank.accounts AS OF TIMESTAMP 'yesterday'", 1525, "YYYY-mm-dd"),
    ("SELECT * FROM bank.accounts AS OF GTID 'nonsense'", 1525, "uuid:n"),
    ("SELECT * FROM bank.accounts AS OF 'binlog.000001':{inside}", 1525, "inside the transaction"),
    ("SELECT * FROM bank.accounts AS OF 'binlog.000000':4", 9006, "oldest readable point"),
    ("SELECT * FROM bank.accounts AS OF 'binlog.999999':4", 8135, "not written yet"),
    (f"SELECT * FROM bank.accounts AS OF TSO {_in_the_future()}", 8135, "future"),
    ("SELECT * FROM bank.accounts AS OF TIMESTAMP '2999-01-01 00:00:00'", 8135, "future"),
    (
        "SELECT * FROM bank.accounts AS OF GTID '3E11FA47-71CA-11E1-9E33-C80AA9429562:1'",
        1525,
        "GTID",
    ),
    ("SELECT * FROM bank.accounts FOR SYSTEM_TIME ALL", 1235, "FOR SYSTEM_TIME"),
    ("SELECT * FROM bank.accounts AS OF TSO 1 JOIN shop.orders", 1235, "join"),
    ("SELECT * FROM bank.nothing AS OF TSO 1", 1146, "doesn't exist"),
    ("START TRANSACTION READ ONLY AS OF TSO", 1525, "malformed"),
    ("SET @@cdc_read_as_of = 'soon'", 1231, "cdc_read_as_of"),
    ("SET GLOBAL cdc_read_as_of = 'TSO 1'", 1227, "SUPER"),
]


def test_bad_points_are_clear_errors_and_the_connection_stays(snap):
    conn = snap.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINLOG EVENTS IN 'binlog.000001' LIMIT 50")
            # A transaction starts at its GTID event: its BEGIN is inside it.
            inside = next(r[1] for r in cur.fetchall() if r[2] == "Query" and r[5] == "BEGIN")
            cases = [(sql.replace("{inside}", str(inside)), c, s) for sql, c, s in BAD_POINTS]
            wrong = wrong_answers(cur, cases)
            assert wrong == [], "\n".join(map(str, wrong))
            # Inside a transaction its reads are pinned: AS OF is refused, the transaction goes on.
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            with pytest.raises(pymysql.err.MySQLError) as refused:
                cur.execute("SELECT COUNT(*) FROM bank.accounts AS OF TSO 1")
            assert refused.value.args[0] == 1568
            cur.execute("SELECT COUNT(*) FROM bank.accounts")
            assert cur.fetchall() == ((ACCOUNTS,),)
            cur.execute("COMMIT")
    finally:
        conn.close()
    # Without the table's SELECT privilege, as of any point: 1142, the connection stays.
    from tests.read_path.conftest import NO_ROWS

    conn = snap.connect(NO_ROWS)
    try:
        with conn.cursor() as cur:
            with pytest.raises(pymysql.err.MySQLError) as denied:
                cur.execute("SELECT * FROM bank.accounts AS OF TSO 1")
            assert denied.value.args[0] == 1142
            cur.execute("SELECT 1")
            assert cur.fetchall() == ((1,),)
    finally:
        conn.close()


def test_the_session_variable_reads_as_of_its_point(snap):
    """`SET cdc_read_as_of`: reads outside a transaction and transactions it starts are as of
    the point (SHOW MASTER STATUS and @@gtid_executed inside give it); '' is the end again."""
    position = _end(snap)
    time.sleep(1.5)  # transfers after the point
    conn = snap.connect(conv=AS_SENT)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM bank.accounts AS OF '{position[0]}':{position[1]}")
            want = sorted(cur.fetchall(), key=repr)
            cur.execute("SET @@cdc_read_as_of = %s", (f"'{position[0]}':{position[1]}",))
            assert _raw(conn, "SELECT * FROM bank.accounts") == want
            cur.execute("BEGIN")
            cur.execute("SHOW MASTER STATUS")
            assert tuple(cur.fetchone()[:2]) == (position[0], str(position[1]))
            assert _raw(conn, "SELECT * FROM bank.accounts") == want
            cur.execute("COMMIT")
            cur.execute("SET @@cdc_read_as_of = ''")
            cur.execute("SHOW MASTER STATUS")
            assert tuple(cur.fetchone()[:2]) != (position[0], str(position[1]))
    finally:
        conn.close()


def test_spellings_and_a_prepared_statement_read_the_same(snap):
    """`FOR SYSTEM_TIME AS OF`, the point as one string, `AS OF` after an alias, and a
    server-side prepared statement (binary rows, a cursor) all read the point's rows."""
    from tests.read_path.binary_client import BinaryClient
    from tests.read_path.conftest import READER

    file, pos = _end(snap)
    time.sleep(1.5)  # transfers after the point
    point = f"'{file}':{pos}"
    conn = snap.connect(conv=AS_SENT)
    try:
        want = _raw(conn, f"SELECT id, balance FROM bank.accounts AS OF {point}")
        assert sum(int(b) for _, b in want) == ACCOUNTS * BALANCE
        for sql in (
            f"SELECT id, balance FROM bank.accounts FOR SYSTEM_TIME AS OF {point}",
            f"SELECT id, balance FROM bank.accounts AS OF '{file}:{pos}'",
            f"SELECT a.id, a.balance FROM bank.accounts a AS OF {point}",
        ):
            assert _raw(conn, sql) == want, sql
    finally:
        conn.close()

    async def prepared() -> tuple[int, int]:
        client = await BinaryClient.connect("127.0.0.1", snap.config.dumper.port, *READER)
        try:
            stmt = await client.prepare(f"SELECT id, balance FROM bank.accounts AS OF {point}")
            whole = await client.execute(stmt)
            cursor = await client.execute(stmt, cursor=True)
            fetched = await client.fetch(stmt, ACCOUNTS + 1)
            return len(whole.rows), len(cursor.rows) + len(fetched.rows)
        finally:
            client.close()

    assert asyncio.run(asyncio.wait_for(prepared(), 60)) == (ACCOUNTS, ACCOUNTS)
