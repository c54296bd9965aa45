"""Hostile SELECTs over logical tables (docs/snapshot-reads.md): what is not supported, malformed
or malicious gets a clean error naming it, never a dropped connection or a traceback; strings
pushed down to the DNs stay strings; clients that vanish in the middle of a read leave nothing
behind; and the writer keeps writing (the `healthy` fixture)."""

from __future__ import annotations

import socket

import pytest

from tests.dumper.hostile.conftest import ADMIN, READER, login_raw, packet, read_packet
from tests.dumper.hostile.test_sql import error_of


@pytest.mark.parametrize(
    ("sql", "codes"),
    [
        ("SELECT * FROM bank.accounts a, bank.accounts b", {1235}),
        ("SELECT * FROM bank.accounts WHERE id IN (SELECT id FROM bank.accounts)", {1235}),
        ("SELECT SLEEP(100) FROM bank.accounts", {1235}),
        ("SELECT * FROM bank.accounts INTO OUTFILE '/tmp/x'", {1235}),
        ("SELECT * FROM bank.accounts FOR UPDATE", {1235}),
        ("SELECT * FROM bank.accounts WHERE " + "NOT " * 20000 + "id = 1", {1064}),
        ("SELECT * FROM bank.accounts WHERE " + "(" * 20000 + "id = 1" + ")" * 20000, {1064}),
        ("SELECT * FROM bank.accounts LIMIT 99999999999999999999999", {1064}),
        ("SELECT * FROM bank.accounts WHERE id = 1e999", {1367}),
        ("SELECT * FROM bank.`accounts``; DROP TABLE x`", {1146}),
        ("SELECT `id``` FROM bank.accounts", {1054}),
        ("SELECT * FROM ../../etc.passwd", {1064}),
        ("SELECT * FROM mysql.user", {1146}),
        ("DELETE FROM bank.accounts", {1064}),
        ("LOCK TABLES bank.accounts WRITE", {1235}),
    ],
)
def test_bad_selects_get_errors(healthy, sql, codes):
    assert error_of(healthy, sql, ADMIN) in codes


def test_rows_need_the_grant(healthy):
    assert error_of(healthy, "SELECT * FROM bank.accounts", READER) == 1142


def test_strings_stay_strings_on_the_dns(healthy):
    """A WHERE literal is quoted for the DN: quotes and backslashes cannot end it."""
    for literal in ("1' OR '1'='1", "1\\' OR 1=1 -- ", "1\\\\' OR 1=1 #"):
        quoted = "'" + literal.replace("\\", "\\\\").replace("'", "''") + "'"
        rows = healthy.query(f"SELECT id FROM bank.accounts WHERE id = {quoted}", ADMIN)
        assert rows in ([], [(1,)]), (literal, rows)
    rows = healthy.query("SELECT COUNT(*) FROM bank.accounts WHERE id IN (1, 2, NULL)", ADMIN)
    assert rows == [(2,)]


def test_clients_vanishing_mid_read(healthy):
    """A client sends a whole-table SELECT and closes at once, 20 times; another reads one
    packet and closes: the server answers the next client as if nothing happened."""
    for i in range(21):
        sock = login_raw(healthy, ADMIN)
        sock.sendall(packet(b"\x03SELECT * FROM bank.accounts", 0))
        if i == 20:
            read_packet(sock)
        sock.close()
    rows = healthy.query("SELECT COUNT(*) FROM bank.accounts", ADMIN)
    assert rows and rows[0][0] > 0
    with socket.create_connection(("127.0.0.1", healthy.port), timeout=5):
        pass
