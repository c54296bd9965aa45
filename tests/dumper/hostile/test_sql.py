"""Hostile SQL through real clients (PyMySQL, the mariadb CLI): numeric overflow, long and
malformed statements, path traversal in file names, privileges, SET abuse. Each gets a clean
MySQL error (never a dropped connection or a traceback) and the writer keeps writing."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess

import pymysql
import pytest

from tests.dumper.hostile.conftest import (
    ADMIN,
    MAX_PACKET,
    READER,
    SLAVE,
    err_code,
    login_raw,
    packet,
    read_packet,
)


def error_of(live, sql: str, who=SLAVE) -> int:
    conn = live.connect(who)
    try:
        with conn.cursor() as cur, pytest.raises(pymysql.err.MySQLError) as err:
            cur.execute(sql)
        # the connection stays usable after the error
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchall() == ((1,),)
        return err.value.args[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SHOW BINLOG EVENTS LIMIT 18446744073709551616", 1064),
        ("SHOW BINLOG EVENTS LIMIT 1, 99999999999999999999999", 1064),
        ("SHOW BINLOG EVENTS FROM 99999999999999999999", 1064),
        ("SHOW BINLOG EVENTS FROM 18446744073709551615", 1220),
        ("SELECT 1 LIMIT 18446744073709551616", 1064),
        ("KILL 18446744073709551616", 1064),
        ("KILL 18446744073709551615", 1094),
        ("SELECT " + "9" * 5000, 1064),
        ("SELECT -" + "9" * 5000, 1064),
        ("SELECT 1e999", 1367),
        ("SELECT " + "1." + "1" * 5000, 1367),
        ("SET @x = " + "7" * 5000, 1064),
        ("SELECT * FROM information_schema.TABLES LIMIT " + "9" * 5000, 1064),
    ],
)
def test_numeric_overflow_is_a_clean_error(healthy, sql, code):
    assert error_of(healthy, sql) == code


def test_the_largest_limits_work(healthy):
    rows = healthy.query("SHOW BINLOG EVENTS LIMIT 18446744073709551615")
    assert rows and rows[0][2] == "Format_desc"
    rows = healthy.query("SHOW BINLOG EVENTS LIMIT 18446744073709551614, 18446744073709551615")
    assert rows == []
    assert healthy.query("SELECT 1 LIMIT 18446744073709551615") == [(1,)]


def test_long_statements_are_answered_or_refused_cleanly(healthy):
    size = MAX_PACKET - 64
    assert healthy.query("SELECT '" + "a" * size + "' AS s")[0][0] == "a" * size
    for sql in (
        "SELECT " + "a" * size,  # a 1 MB identifier
        "SELECT '" + "\\'" * (size // 2),  # unterminated, all escapes
        "SELECT " + "1," * (size // 2) + "1",  # more tokens than a statement may have
        "SELECT 1 " + "/*" * (size // 2),  # comment openers
        "SELECT `" + "``" * (size // 2),
    ):
        assert error_of(healthy, sql) == 1064


def test_many_statements_in_one_query(healthy):
    conn = healthy.connect(client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1;" * 20000)
            count = 1
            while cur.nextset():
                count += 1
        assert count == 20000
    finally:
        conn.close()


def test_random_garbage_sql(healthy):
    rng = random.Random(19)
    alphabet = "'\"`\\;#-/*!@().,=0123456789eE abcSELECTSHOW\n\t\x00é"
    conn = healthy.connect()
    try:
        for _ in range(300):
            sql = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80)))
            with conn.cursor() as cur:
                try:
                    cur.execute(sql)
                    while cur.nextset():
                        pass
                except pymysql.err.ProgrammingError:
                    pass  # 1064/1065/1146/...: an answer
                except pymysql.err.OperationalError as exc:
                    assert exc.args[0] not in (2006, 2013), f"{sql!r} dropped the connection"
                except pymysql.err.MySQLError:
                    pass
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                assert cur.fetchall() == ((1,),)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "name",
    [
        "../../../../../../etc/passwd",
        "/etc/passwd",
        "binlog.index",
        "..",
        ".",
        "binlog.000001\0/../../etc/passwd",
        "recovery-point-binlog",
    ],
)
def test_path_traversal_in_file_names(healthy, name):
    index_before = (healthy.binlog_dir / "binlog.index").read_bytes()
    files_before = sorted(p.name for p in healthy.binlog_dir.iterdir())
    quoted = name.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0")
    assert error_of(healthy, f"SHOW BINLOG EVENTS IN '{quoted}'") == 1220
    assert error_of(healthy, f"PURGE BINARY LOGS TO '{quoted}'", ADMIN) == 1373
    with login_raw(healthy) as sock:
        body = struct.pack("<IHI", 4, 0, 4242) + name.encode()
        sock.sendall(packet(b"\x12" + body, 0))
        _, payload = read_packet(sock)
        assert err_code(payload) == 1236
    assert (healthy.binlog_dir / "binlog.index").read_bytes().startswith(index_before)
    assert set(files_before) <= {p.name for p in healthy.binlog_dir.iterdir()}


def test_a_path_names_a_file_of_the_binlog_directory_only(healthy):
    """A client may name a served file by a path (its directory is ignored): it still reads
    that file of the binlog directory, never the path."""
    first = healthy.query("SHOW BINLOG EVENTS IN 'binlog.000001' LIMIT 3")
    assert healthy.query("SHOW BINLOG EVENTS IN '../x/binlog.000001' LIMIT 3") == first


def test_privileges_follow_the_user_flags(healthy):
    # a user without `replication`: no binlog contents, no binlog status (MySQL: 1227)
    for sql in ("SHOW BINLOG EVENTS", "SHOW MASTER STATUS", "SHOW BINARY LOGS",
                "SHOW BINLOG STATUS", "SHOW SLAVE HOSTS", "SHOW REPLICAS",
                "PURGE BINARY LOGS TO 'binlog.000001'"):  # fmt: skip
        assert error_of(healthy, sql, READER) == 1227
    # `replication`: what Canal, zongji (startAtEnd), Debezium and mariadb-binlog need
    assert healthy.query("SHOW BINLOG EVENTS LIMIT 1")[0][2] == "Format_desc"
    assert healthy.query("SHOW MASTER STATUS")[0][0].startswith("binlog.")
    assert healthy.query("SHOW BINARY LOGS")[0][0] == "binlog.000001"
    grants = healthy.query("SHOW GRANTS")[0][0]
    assert "REPLICATION SLAVE" in grants and "REPLICATION CLIENT" in grants
    assert "REPLICATION" not in healthy.query("SHOW GRANTS", READER)[0][0]
    # SHOW GRANTS FOR someone else: only an admin (MySQL: SELECT on the mysql schema, 1044)
    assert error_of(healthy, f"SHOW GRANTS FOR '{ADMIN[0]}'@'%'") == 1044
    assert error_of(healthy, f"SHOW GRANTS FOR {SLAVE[0]}", READER) == 1044
    assert "SUPER" in healthy.query(f"SHOW GRANTS FOR '{ADMIN[0]}'", ADMIN)[0][0]
    assert healthy.query("SHOW GRANTS FOR CURRENT_USER()")[0][0] == grants


def test_processlist_shows_only_own_threads_without_process(healthy):
    others = [healthy.connect(ADMIN), healthy.connect(READER)]
    try:
        mine = {row[1] for row in healthy.query("SHOW PROCESSLIST")}
        assert mine == {SLAVE[0]}
        everyone = {row[1] for row in healthy.query("SHOW PROCESSLIST", ADMIN)}
        assert {ADMIN[0], READER[0]} <= everyone
    finally:
        for c in others:
            c.close()


def test_set_password_and_account_statements_are_refused(healthy):
    for sql in (
        "SET PASSWORD = 'x'",
        "SET PASSWORD FOR 'slave'@'%' = PASSWORD('x')",
        "ALTER USER 'slave'@'%' IDENTIFIED BY 'x'",
        "CREATE USER evil IDENTIFIED BY 'x'",
        "GRANT ALL ON *.* TO 'reader'@'%'",
        "REVOKE REPLICATION SLAVE ON *.* FROM 'slave'@'%'",
        "DROP USER 'repl'@'%'",
    ):
        assert error_of(healthy, sql) == 1290
        assert error_of(healthy, sql, ADMIN) == 1290
    # and the password did not change
    assert healthy.query("SELECT 1", SLAVE) == [(1,)]


def test_set_accepts_what_clients_send_and_refuses_the_rest(healthy):
    conn = healthy.connect()
    try:
        with conn.cursor() as cur:
            for sql in (
                # Canal, Debezium, go-mysql, python-mysql-replication, replicas, Connector/J
                "set wait_timeout=9999999",
                "set net_write_timeout=7200",
                "set net_read_timeout=7200",
                "set names 'binary'",
                "set @master_binlog_checksum= @@global.binlog_checksum",
                "set @slave_uuid=uuid(), @replica_uuid=uuid()",
                "SET @mariadb_slave_capability='4'",
                "set @master_heartbeat_period=15000000000, @source_heartbeat_period=15000000000",
                "SET @rpl_semi_sync_slave = 1, @rpl_semi_sync_replica = 1",
                "SET @slave_connect_state='', @slave_gtid_strict_mode=1",
                "SET @slave_gtid_ignore_duplicates=0",
                "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci",
                "SET character_set_results = NULL",
                "SET autocommit=1",
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                "SET sql_mode='STRICT_TRANS_TABLES'",
                "SET time_zone = '+00:00'",
                "SET @@session.session_track_schema = 1",
                "SET SESSION sql_select_limit = DEFAULT",
                "SET @anything_at_all = 'user variables are always fine'",
            ):
                cur.execute(sql)
    finally:
        conn.close()
    assert error_of(healthy, "SET no_such_variable = 1") == 1193
    assert error_of(healthy, "SET @@session.no_such_variable = 1") == 1193
    assert error_of(healthy, "SET @a = 1, no_such_variable = 1") == 1193
    assert error_of(healthy, "SET max_allowed_packet = 1073741824") == 1621
    assert error_of(healthy, "SET GLOBAL max_allowed_packet = 1073741824", ADMIN) == 1227
    assert error_of(healthy, "SET version = '9.9'") == 1238


@pytest.mark.skipif(shutil.which("mariadb") is None, reason="no mariadb CLI")
def test_mariadb_cli_sees_the_same_errors(healthy):
    run = subprocess.run(
        [
            "mariadb",
            "-h127.0.0.1",
            f"-P{healthy.port}",
            f"-u{READER[0]}",
            f"-p{READER[1]}",
            "--skip-ssl",
            "-e",
            "SHOW BINLOG EVENTS",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1 and "ERROR 1227" in run.stderr, run.stderr


def test_variables_of_a_connection_are_bounded(healthy):
    """A connection keeps at most max_allowed_packet bytes of variables (ERR 1037 beyond)."""
    big = "v" * (MAX_PACKET * 6 // 10)
    conn = healthy.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET @a = '{big}'")
            cur.execute(f"SET @a = '{big.upper()}'")  # overwriting costs nothing more
            with pytest.raises(pymysql.err.MySQLError) as err:
                cur.execute(f"SET @b = '{big}'")
            assert err.value.args[0] == 1037
            cur.execute("SELECT @b")
            assert cur.fetchone() == (None,)
            for i in range(200):  # many small ones are fine
                cur.execute(f"SET @v{i} = {i}")
    finally:
        conn.close()
