"""What SQL clients see: the mariadb CLI's tables, pymysql result types, SHOW VARIABLES filters,
SELECT/SET of user and system variables, Canal's multi-statement batch, schema queries, PURGE,
KILL, SHOW SLAVE HOSTS and the Connector/J init query."""

from __future__ import annotations

import subprocess

import pymysql
import pytest
from pymysql.constants import CLIENT

from tests.dumper.helpers import PASSWORD, USER


def _connect(port: int, user: str = USER, password: str = PASSWORD, **kw) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, **kw)


def _rows(conn, sql: str):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def _columns(conn, sql: str) -> list[str]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [d[0] for d in cur.description]


def test_mariadb_cli_tables(server, binlogs):
    res = subprocess.run(
        [
            "mariadb", "-h127.0.0.1", f"-P{server.port}", f"-u{USER}", f"-p{PASSWORD}", "--table",
            "-e", 'SHOW MASTER STATUS; SHOW BINARY LOGS; SHOW BINLOG EVENTS IN "binlog.000001" LIMIT 5',
        ],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = res.stdout
    size2 = (binlogs.dir / "binlog.000002").stat().st_size
    assert f"| binlog.000002 | {size2:>8} |" in out
    assert "| Log_name      | File_size | Encrypted |" in out
    assert "Server ver: 5.7.44-cdc-log, Binlog ver: 4" in out
    assert "use `gbl`; CREATE TABLE t1" in out
    assert out.count("| binlog.000001 |") == 6  # 1 in SHOW BINARY LOGS + 5 events


def test_binlog_events_info_and_types(server, binlogs):
    conn = _connect(server.port)
    rows = _rows(conn, "SHOW BINLOG EVENTS IN 'binlog.000001'")
    kinds = [(r[2], r[5]) for r in rows]
    assert kinds[0] == ("Format_desc", "Server ver: 5.7.44-cdc-log, Binlog ver: 4")
    assert ("Rows_query", "# /*CDC trace=1.1 */ insert") in kinds
    assert ("Table_map", "table_id: 108 (gbl.t1)") in kinds
    assert ("Write_rows", "table_id: 108 flags: STMT_END_F") in kinds
    assert ("Xid", "COMMIT /* xid=1 */") in kinds
    assert kinds[-1] == ("Rotate", "binlog.000002;pos=4")
    assert all(isinstance(r[1], int) and isinstance(r[4], int) for r in rows)
    # FROM / LIMIT offset,count
    assert (
        _rows(conn, f"SHOW BINLOG EVENTS IN 'binlog.000001' FROM {rows[2][1]} LIMIT 1,2")
        == rows[3:5]
    )
    assert _rows(conn, "SHOW BINLOG EVENTS LIMIT 1")[0][0] == "binlog.000001"
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(conn, "SHOW BINLOG EVENTS IN 'binlog.000001' FROM 5")
    assert err.value.args[0] == 1220
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(conn, "SHOW BINLOG EVENTS IN 'nope.000001'")
    assert err.value.args[0] == 1220


def test_master_status_types_and_variables(server, binlogs):
    conn = _connect(server.port)
    (row,) = _rows(conn, "SHOW MASTER STATUS")
    assert row[0] == "binlog.000002" and isinstance(row[1], int)
    assert row[1] == (binlogs.dir / "binlog.000002").stat().st_size
    assert _rows(conn, "SHOW BINARY LOG STATUS") == (row,)
    assert _columns(conn, "SHOW BINARY LOGS") == ["Log_name", "File_size", "Encrypted"]
    assert _rows(conn, "show variables like 'binlog_format'") == (("binlog_format", "ROW"),)
    assert _rows(conn, "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'") == (
        ("binlog_checksum", "CRC32"),
    )
    assert _rows(conn, "show global variables  like 'rds\\_%'") == ()
    assert _rows(conn, "SHOW VARIABLES LIKE 'binlog\\_row\\_i%'") == (("binlog_row_image", "FULL"),)
    got = _rows(
        conn, "SHOW VARIABLES WHERE Variable_name IN ('character_set_server','collation_server')"
    )
    assert dict(got) == {
        "character_set_server": "utf8mb4",
        "collation_server": "utf8mb4_general_ci",
    }
    assert _rows(conn, "SHOW VARIABLES WHERE Variable_name = 'sql_mode'")[0][0] == "sql_mode"
    assert _rows(conn, "SELECT @@GLOBAL.SERVER_ID") == ((100,),)
    assert _columns(conn, "select @@GLOBAL.binlog_checksum as checksum") == ["checksum"]
    assert _columns(conn, "SELECT @@global.gtid_mode, @@session.time_zone tz") == [
        "@@global.gtid_mode", "tz",
    ]  # fmt: skip
    assert _rows(conn, "SELECT VERSION()") == (("5.7.44-cdc-log",),)
    assert _rows(conn, "SELECT 1") == ((1,),)
    assert isinstance(_rows(conn, "SELECT UNIX_TIMESTAMP()")[0][0], int)
    assert _rows(conn, "SELECT binlog_gtid_pos('binlog.000002', 4)") == (("",),)
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(conn, "SELECT @@no_such_variable")
    assert err.value.args[0] == 1193
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(conn, "FLUSH LOGS")  # (FLUSH TABLES is answered: snapshot reads)
    assert err.value.args[0] == 1064
    assert _rows(conn, "SELECT 2") == ((2,),)  # still usable after errors


def test_user_variables_are_per_session(server):
    a, b = _connect(server.port), _connect(server.port)
    _rows(a, "SET @master_heartbeat_period = 5000000000, @source_heartbeat_period = 5000000000")
    _rows(a, "SET @master_binlog_checksum= @@global.binlog_checksum, @x = 'v', @u = uuid()")
    _rows(a, "SET NAMES 'binary'")
    _rows(a, "set wait_timeout=9999999")
    _rows(a, "SET autocommit=1")
    assert _rows(a, "SELECT @master_binlog_checksum, @x, @master_heartbeat_period") == (
        ("CRC32", "v", 5000000000),
    )
    assert len(_rows(a, "SELECT @u")[0][0]) == 36
    assert _rows(a, "SELECT @@wait_timeout") == ((9999999,),)
    assert _rows(b, "SELECT @master_binlog_checksum, @@wait_timeout") == ((None, 28800),)


def test_connector_j_init_query(server):
    conn = _connect(server.port)
    sql = (
        "/* mysql-connector-java-8.0.33 (Revision: x) */SELECT  @@session.auto_increment_increment "
        "AS auto_increment_increment, @@character_set_client AS character_set_client, "
        "@@character_set_connection AS character_set_connection, @@character_set_results AS "
        "character_set_results, @@character_set_server AS character_set_server, @@collation_server "
        "AS collation_server, @@collation_connection AS collation_connection, @@init_connect AS "
        "init_connect, @@interactive_timeout AS interactive_timeout, @@license AS license, "
        "@@lower_case_table_names AS lower_case_table_names, @@max_allowed_packet AS "
        "max_allowed_packet, @@net_write_timeout AS net_write_timeout, @@performance_schema AS "
        "performance_schema, @@query_cache_size AS query_cache_size, @@query_cache_type AS "
        "query_cache_type, @@sql_mode AS sql_mode, @@system_time_zone AS system_time_zone, "
        "@@time_zone AS time_zone, @@transaction_isolation AS transaction_isolation, "
        "@@wait_timeout AS wait_timeout"
    )
    cols = _columns(conn, sql)
    assert cols[0] == "auto_increment_increment" and cols[-1] == "wait_timeout" and len(cols) == 21


def test_multi_statements_and_schema_queries(server):
    conn = _connect(server.port, client_flag=CLIENT.MULTI_STATEMENTS)
    with conn.cursor() as cur:
        cur.execute("show create table `gbl`.`t1`;show create table gbl.t1; SELECT 7")
        first = cur.fetchall()
        assert first[0][0] == "t1" and "PRIMARY KEY (`id`)" in first[0][1]
        assert cur.nextset() and cur.fetchall() == first
        assert cur.nextset() and cur.fetchall() == ((7,),)
        assert not cur.nextset()
    assert _rows(conn, "show databases") == (("information_schema",), ("gbl",))
    assert _rows(conn, "show full tables from `gbl` where Table_type = 'BASE TABLE'") == (
        ("t1", "BASE TABLE"),
    )
    assert [r[0] for r in _rows(conn, "desc `gbl`.`t1`")] == ["id", "name"]
    assert len(_rows(conn, "show full columns from `gbl`.`t1`")[0]) == 9
    zongji = (
        "SELECT COLUMN_NAME, COLLATION_NAME, CHARACTER_SET_NAME, COLUMN_COMMENT, COLUMN_TYPE FROM "
        "information_schema.columns WHERE table_schema='gbl' AND table_name='t1'"
    )
    assert _rows(conn, zongji) == (
        ("id", None, None, "", "int(11)"),
        ("name", "utf8mb4_general_ci", "utf8mb4", "", "varchar(20)"),
    )
    assert _rows(
        conn,
        "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'gbl' AND "
        "TABLE_NAME = 't1' ORDER BY ORDINAL_POSITION",
    ) == (("id",), ("name",))
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(conn, "show create table gbl.nope")
    assert err.value.args[0] == 1146
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(_connect(server.port), "SELECT 1; SELECT 2")
    assert err.value.args[0] == 1064  # without CLIENT_MULTI_STATEMENTS


def test_index_and_table_status_queries(server):
    """What canal, Debezium and friends ask about a table: its indexes and status."""
    conn = _connect(server.port)
    pk = ("t1", 0, "PRIMARY", 1, "id", "A", None, None, None, "", "BTREE", "", "")
    assert _rows(conn, "show index from `gbl`.`t1`") == (pk,)
    assert _rows(conn, "SHOW KEYS IN t1 FROM gbl") == (pk,)
    assert _columns(conn, "show indexes from gbl.t1")[:5] == [
        "Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name",
    ]  # fmt: skip
    (status,) = _rows(conn, "SHOW TABLE STATUS FROM gbl LIKE 't%'")
    assert status[:2] == ("t1", "InnoDB") and len(status) == 18
    assert _rows(
        conn,
        "SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM "
        "information_schema.STATISTICS WHERE TABLE_SCHEMA = 'gbl' AND TABLE_NAME = 't1'",
    ) == (("PRIMARY", 1, "id", 0),)
    assert _rows(
        conn,
        "SELECT CONSTRAINT_NAME, COLUMN_NAME, ORDINAL_POSITION FROM "
        "information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'gbl'",
    ) == (("PRIMARY", "id", 1),)
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(conn, "show index from gbl.nope")
    assert err.value.args[0] == 1146


def test_grants_kill_purge(server, binlogs):
    reader = _connect(server.port, "reader", "pw")
    assert "REPLICATION SLAVE" not in _rows(reader, "SHOW GRANTS")[0][0]
    assert (
        "REPLICATION SLAVE" in _rows(_connect(server.port), "SHOW GRANTS FOR CURRENT_USER()")[0][0]
    )
    victim = _connect(server.port)
    victim_id = _rows(victim, "SELECT CONNECTION_ID()")[0][0]
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(reader, f"KILL {victim_id}")
    assert err.value.args[0] == 1095
    _rows(_connect(server.port), f"KILL {victim_id}")  # same user may
    with pytest.raises(pymysql.err.MySQLError):
        _rows(victim, "SELECT 1")
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(reader, "PURGE BINARY LOGS TO 'binlog.000002'")
    assert err.value.args[0] == 1227
    admin = _connect(server.port, "admin", "adm")
    with pytest.raises(pymysql.err.MySQLError) as err:
        _rows(admin, "PURGE BINARY LOGS TO 'binlog.000009'")
    assert err.value.args[0] == 1373
    _rows(admin, "PURGE BINARY LOGS BEFORE '2999-01-01 00:00:00'")  # keeps the active file
    assert _rows(admin, "SHOW BINARY LOGS")[0][0] == "binlog.000002"
    assert not (binlogs.dir / "binlog.000001").exists()
    _rows(admin, "PURGE BINARY LOGS TO 'binlog.000002'")  # nothing before it is left
    assert [r[0] for r in _rows(admin, "SHOW BINARY LOGS")] == ["binlog.000002"]


def test_empty_password_user(server):
    assert _rows(_connect(server.port, "nopw", ""), "SELECT 1") == ((1,),)
    with pytest.raises(pymysql.err.OperationalError) as err:
        _connect(server.port, "nopw", "x")
    assert err.value.args[0] == 1045
