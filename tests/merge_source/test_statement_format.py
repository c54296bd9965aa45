"""A DN whose binlog turns to STATEMENT (or MIXED) while the pipeline reads it: its MergeSource
stops on the first statement-logged write, naming the DN, the event's position and the
statement, and hands out nothing of it (no statement reaches the global binlog). On a real
mariadbd (a throw-away server of its own: the test changes its binlog_format)."""

from __future__ import annotations

import asyncio
import logging

import pymysql
import pytest

from cdc.protocol import BinlogPosition, DumpSettings
from cdc_equipment.local_cluster.testing import throwaway_server
from merge_source.classifier import StatementLogged, statement_dml
from merge_source.fragment import Fragment
from merge_source.processor import SourceProcessor
from merge_source.source import MergeSource


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = throwaway_server(tmp_path_factory.mktemp("statement"), server_id=601, name="dn1")
    try:
        yield s
    finally:
        s.stop()


def connect(server) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)


def test_what_counts_as_a_statement_logged_write():
    for text in (
        b"INSERT INTO t VALUES (1)",
        b"/*CDC trace=3.1 cn=1 */ update t set a = 1",
        b"  (DELETE FROM t)",
        b"REPLACE INTO t VALUES (1)",
        b"/* a */ /* b */ LOAD DATA INFILE 'x' INTO TABLE t",
    ):
        assert statement_dml(text), text
    for text in (
        b"XA END X'6364632d31',X'31',1",
        b"COMMIT",
        b"SAVEPOINT `a`",
        b"CREATE TABLE t (a INT)",
        b"ALTER TABLE inserts ADD c INT",
        b"TRUNCATE t",
        b"/* INSERT */ DROP TABLE t",
    ):
        assert not statement_dml(text), text


@pytest.mark.parametrize("how", ["xa", "local", "mixed"])
async def test_a_dn_turned_to_statement_stops_its_source_loudly(server, how, caplog):
    db = f"stmt_{how}"
    conn = connect(server)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
        cur.execute("FLUSH BINARY LOGS")  # (read from a file of its own: no earlier case's)
        cur.execute("SHOW MASTER STATUS")
        file, _pos = cur.fetchone()[:2]
        cur.execute(f"INSERT INTO {db}.t VALUES (1, 1)")  # in ROW: a row event, fine
    settings = DumpSettings("127.0.0.1", server.port, "root", "", server_id=9391, name="dn1")
    source = MergeSource(
        settings, SourceProcessor(1, "dn1"), BinlogPosition(file, 4), asyncio.Queue()
    )
    task = asyncio.create_task(source.run())
    try:
        await asyncio.sleep(0.5)
        assert not task.done()  # a ROW write: read without complaint
        with conn.cursor() as cur:
            cur.execute(
                f"SET GLOBAL binlog_format = '{'MIXED' if how == 'mixed' else 'STATEMENT'}'"
            )
        wrong = connect(server)  # (a session takes the global format when it connects)
        with wrong.cursor() as cur:
            if how == "xa":  # a CN branch, in the CN's xid format
                xid = "'cdc-900000007','1',1"
                cur.execute(f"XA START {xid}")
                cur.execute(f"/*CDC trace=1.1 cn=1 */ UPDATE {db}.t SET v = 2 WHERE id = 1")
                cur.execute(f"XA END {xid}")
                cur.execute(f"XA PREPARE {xid}")
                cur.execute(f"XA ROLLBACK {xid}")
            else:  # MIXED logs a deterministic statement as a statement too
                cur.execute(f"UPDATE {db}.t SET v = 2 WHERE id = 1")
        wrong.close()
        with caplog.at_level(logging.ERROR), pytest.raises(StatementLogged) as err:
            async with asyncio.timeout(20):
                await task
    finally:
        task.cancel()
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_format = 'ROW'")
            cur.execute(f"DROP DATABASE {db}")
        conn.close()
    message = str(err.value)
    assert "logged as a statement" in message and f"UPDATE {db}.t SET v = 2" in message
    assert message.startswith("binlog.") and "set binlog_format=ROW" in message
    assert source.error is err.value  # what `cdc status` shows, after the DN's name
    assert any("dn1: MergeSource stopped" in r.getMessage() for r in caplog.records)
    # Nothing of the statement was handed out: only the ROW write's fragment, if released.
    handed = []
    while not source.queue.empty():
        handed += [o for o in source.queue.get_nowait() if isinstance(o, Fragment)]
    assert len(handed) <= 1
