"""GTID mode with python-mysql-replication (`auto_position`: COM_BINLOG_DUMP_GTID) on the real
pipeline output: every transaction has a GTID `uuid:n`, n gapless from 1; the server reports
them (`@@gtid_mode`, `@@gtid_executed`, SHOW MASTER STATUS); a dump from a set `uuid:1-k`
starts at transaction k + 1 and reads the rest exactly once; a set holding transactions the
server never wrote gets MySQL's error 1236."""

from __future__ import annotations

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent, RowsQueryLogEvent

from tests.e2e.global_binlog import read_global_binlog

pytestmark = pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning")


def settings(pipeline) -> dict:
    return {
        "host": pipeline.host,
        "port": pipeline.port,
        "user": pipeline.user,
        "password": pipeline.password,
    }


def query(pipeline, sql: str) -> tuple:
    conn = pymysql.connect(**settings(pipeline))
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchone()
    finally:
        conn.close()


def read_by_gtid(pipeline, gtid_set: str) -> list[tuple[str, str]]:
    """(GTID, CTS mark) of every transaction a GTID dump from `gtid_set` sends."""
    stream = BinLogStreamReader(
        connection_settings=settings(pipeline),
        server_id=4321,
        blocking=False,
        auto_position=gtid_set,
        only_events=[GtidEvent, RowsQueryLogEvent],
    )
    out, gtid = [], None
    try:
        for ev in stream:
            if isinstance(ev, GtidEvent):
                gtid = ev.gtid
            else:
                out.append((gtid, ev.query))
    finally:
        stream.close()
    return out


def test_every_transaction_has_a_gapless_gtid_the_server_reports(pipeline):
    txns = read_global_binlog(pipeline.binlog_dir)
    uuid = query(pipeline, "SELECT @@server_uuid")[0]
    gnos = []
    for txn in txns:
        assert txn.gtids and all(g.startswith(uuid + ":") for g in txn.gtids), txn
        gnos += [int(g.rsplit(":", 1)[1]) for g in txn.gtids]
    assert gnos == list(range(1, len(gnos) + 1))
    assert query(pipeline, "SELECT @@gtid_mode, @@enforce_gtid_consistency") == ("ON", "ON")
    executed = query(pipeline, "SELECT @@gtid_executed")[0]
    assert executed == f"{uuid}:1-{len(gnos)}"
    assert query(pipeline, "SELECT @@gtid_purged")[0] == ""
    assert query(pipeline, "SHOW MASTER STATUS")[4] == executed


def test_a_gtid_dump_starts_after_the_clients_set(pipeline):
    txns = read_global_binlog(pipeline.binlog_dir)
    uuid = query(pipeline, "SELECT @@server_uuid")[0]
    expected = [(t.gtids[-1], t.mark.decode()) for t in txns]
    k = len(txns) // 2
    last_of_k = int(txns[k - 1].gtids[-1].rsplit(":", 1)[1])
    got = read_by_gtid(pipeline, f"{uuid}:1-{last_of_k}")
    assert got == expected[k:]
    # Another server's GTIDs in the set are not ours: they change nothing.
    other = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100"
    assert read_by_gtid(pipeline, f"{other},{uuid}:1-{last_of_k}") == expected[k:]
    # Up to date: nothing to send, no error.
    assert read_by_gtid(pipeline, query(pipeline, "SELECT @@gtid_executed")[0]) == []


def test_a_set_with_transactions_never_written_is_refused(pipeline):
    uuid = query(pipeline, "SELECT @@server_uuid")[0]
    n = int(query(pipeline, "SELECT @@gtid_executed")[0].rsplit("-", 1)[1])
    with pytest.raises(pymysql.err.OperationalError) as err:
        read_by_gtid(pipeline, f"{uuid}:1-{n + 5}")
    assert err.value.args[0] == 1236
    assert "Replica has more GTIDs than the source has" in err.value.args[1]


def test_a_set_with_gaps_gets_only_the_transactions_it_lacks(pipeline):
    """MySQL's dump thread skips what the client holds after its first gap, and so do we: a
    replica that skipped transactions by hand gets those and nothing twice."""
    txns = read_global_binlog(pipeline.binlog_dir)
    uuid = query(pipeline, "SELECT @@server_uuid")[0]
    last = int(txns[-1].gtids[-1].rsplit(":", 1)[1])
    a, b = last // 4, last // 2
    gtid_set = f"{uuid}:1-{a}:{a + 3}-{b}:{b + 2}"
    held = {*range(1, a + 1), *range(a + 3, b + 1), b + 2}
    expected = [
        (t.gtids[-1], t.mark.decode())
        for t in txns
        if int(t.gtids[-1].rsplit(":", 1)[1]) not in held
    ]
    assert read_by_gtid(pipeline, gtid_set) == expected
