"""python-mysql-replication's BinLogStreamReader against the Dumper: every row event with values
and column names (from TABLE_MAP optional metadata), non-blocking and blocking, resume mid-file."""

from __future__ import annotations

import threading

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from tests.dumper.binlog_gen import T1
from tests.dumper.helpers import PASSWORD, USER, wait_for

ROWS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]


def _reader(port: int, **kw) -> BinLogStreamReader:
    settings = {"host": "127.0.0.1", "port": port, "user": USER, "password": PASSWORD}
    return BinLogStreamReader(connection_settings=settings, server_id=77, resume_stream=True, **kw)


def _summary(ev) -> tuple:
    if isinstance(ev, UpdateRowsEvent):
        return ("U", ev.table, [(r["before_values"], r["after_values"]) for r in ev.rows])
    kind = "I" if isinstance(ev, WriteRowsEvent) else "D"
    return (kind, ev.table, [r["values"] for r in ev.rows])


def test_non_blocking_reads_every_row_event(server, binlogs):
    stream = _reader(
        server.port, blocking=False, log_file="binlog.000001", log_pos=4, only_events=ROWS
    )
    try:
        got = [_summary(ev) for ev in stream]
    finally:
        stream.close()
    assert got == [
        ("I", "t1", [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]),
        ("I", "t1", [{"id": 3, "name": "c"}]),
        ("U", "t1", [({"id": 2, "name": "b"}, {"id": 2, "name": "bb"})]),
        ("D", "t1", [{"id": 1, "name": "a"}]),
        ("I", "t1", [{"id": 4, "name": None}]),
    ]


def test_resume_mid_file_and_rotate_positions(server, binlogs):
    # Start at the second transaction of file 1 (a position SHOW BINLOG EVENTS reports).
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=server.port, user=USER, password=PASSWORD)
    with conn.cursor() as cur:
        cur.execute("SHOW BINLOG EVENTS IN 'binlog.000001'")
        begins = [r[1] for r in cur.fetchall() if r[5] == "BEGIN"]
    conn.close()
    stream = _reader(
        server.port,
        blocking=False,
        log_file="binlog.000001",
        log_pos=begins[1],
        only_events=[*ROWS, RotateEvent, XidEvent],
    )
    try:
        events = list(stream)
    finally:
        stream.close()
    rows = [_summary(e) for e in events if type(e) in ROWS]
    assert rows[0] == ("I", "t1", [{"id": 3, "name": "c"}])
    rotates = [(e.next_binlog, e.position) for e in events if isinstance(e, RotateEvent)]
    assert rotates[0] == ("binlog.000001", begins[1])  # the fake ROTATE names the start
    assert ("binlog.000002", 4) in rotates
    assert stream.log_file == "binlog.000002"


def test_blocking_stream_sees_new_transaction(server, binlogs):
    stream = _reader(
        server.port,
        blocking=True,
        log_file="binlog.000002",
        log_pos=4,
        only_events=ROWS,
        slave_heartbeat=1,
    )
    got: list = []

    def consume():
        for ev in stream:
            got.append(_summary(ev))
            if ev.rows[0].get("values", {}).get("id") == 99:
                return

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    try:
        wait_for(lambda: len(got) >= 3, 10, "existing rows")
        binlogs.active.txn(T1, 10, insert=[(99, "new")])
        binlogs.active.flush(binlogs.dir / "binlog.000002")
        server.notify()
        t.join(10)
        assert got[-1] == ("I", "t1", [{"id": 99, "name": "new"}])
    finally:
        stream.close()
