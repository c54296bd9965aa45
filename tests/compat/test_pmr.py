"""python-mysql-replication (BinLogStreamReader) over the dumper on the real pipeline output:
logical names, column names from the table maps, and the same values our codec reads from the
files. (tests/dumper/test_pmr.py covers blocking reads and resume positions.)"""

from __future__ import annotations

from decimal import Decimal

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import RowsQueryLogEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from tests.compat.expected import COLUMNS
from tests.e2e.global_binlog import read_global_binlog

KINDS = {WriteRowsEvent: "write", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}


def images(kind: str, rows: list) -> list[dict]:
    if kind == "update":
        return [r["after_values"] for r in rows]
    return [r["values"] for r in rows]


def key_values(db: str, table: str, row) -> tuple:
    """What both decoders must agree on, per table (positional row from our codec, or dict)."""
    row = list(row.values()) if isinstance(row, dict) else row
    if (db, table) == ("bank", "accounts"):
        return (row[0], row[1])
    if (db, table) == ("shop", "orders"):
        return (row[0], row[1], Decimal(row[2]), row[3], text(row[5]))
    return (text(row[0]),)  # the primary key


def text(value):
    """Our codec keeps strings as the stored bytes; pmr decodes them."""
    return value.decode() if isinstance(value, bytes) else value


@pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning")  # pmr's own call
def test_pmr_reads_every_transaction_with_names_and_values(pipeline):
    stream = BinLogStreamReader(
        connection_settings={
            "host": pipeline.host,
            "port": pipeline.port,
            "user": pipeline.user,
            "password": pipeline.password,
        },
        server_id=4311,
        blocking=False,
        resume_stream=True,
        log_file="binlog.000001",
        log_pos=4,
        only_events=[*KINDS, RowsQueryLogEvent],
    )
    got, changes = [], []
    try:
        for ev in stream:
            if isinstance(ev, RowsQueryLogEvent):
                got.append((int(ev.query.split("::")[1]), changes))
                changes = []
                continue
            names = COLUMNS.get((ev.schema, ev.table))
            if names is not None:
                assert list(images(KINDS[type(ev)], ev.rows)[0]) == names
            changes.append(
                (ev.schema, ev.table, KINDS[type(ev)], len(ev.rows))
                + tuple(
                    key_values(ev.schema, ev.table, r) for r in images(KINDS[type(ev)], ev.rows)
                )
            )
    finally:
        stream.close()

    expected = []
    for txn in read_global_binlog(pipeline.binlog_dir):
        ours = []
        for db, table, kind, rows in txn.changes:
            after = [r[1] for r in rows] if kind == "update" else rows
            ours.append(
                (db, table, kind, len(rows)) + tuple(key_values(db, table, r) for r in after)
            )
        expected.append((txn.tso, ours))
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e, (g, e)
