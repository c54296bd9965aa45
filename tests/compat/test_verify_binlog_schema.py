"""`cdc verify-binlog`'s schema check: a binlog written by the project's own writer, served by
the dumper's protocol server and read by python-mysql-replication, whose rows after an ALTER
TABLE carry the column set of before it. The check fails naming the transaction, the table and
the columns; the same binlog with the right columns passes. No cluster needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from cdc.binlog.constants import ColumnType as T
from cdc.binlog.events import TableMapEvent, XidEvent, cts_mark
from cdc.binlog.query import QueryEvent
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column
from cdc_cli.commands.verify import serve_files
from cdc_equipment.checks.ddl_replay import LogicalSchema
from cdc_equipment.checks.verify_binlog import check, read_server

pytest.importorskip("pymysqlreplication")

OLD = [
    Column(T.LONG, nullable=False, name=b"id"),
    Column(T.LONG, nullable=False, name=b"qty"),
    Column(T.VARCHAR, 256, name=b"label", collation=45),
]
NEW = [*OLD, Column(T.LONG, name=b"extra")]
WIDE = [*OLD[:2], Column(T.VARCHAR, 384, name=b"label", collation=45)]


def write_binlog(directory: Path, after_alter: list[Column], after_modify: list[Column]) -> list:
    """CREATE, a row, ADD COLUMN, a row written with `after_alter`, DROP COLUMN + MODIFY, a row
    written with `after_modify`; returns the ground truth of its CN transactions."""
    txns: list[list[object]] = []
    truth = [{"tso": 1000, "kind": "CdcStart", "txn_id": 0, "participants": []}]

    def ddl(sql: str) -> None:
        tso = 1001 + len(txns)
        txns.append([QueryEvent(sql.encode(), db=b"mix"), cts_mark(tso)])
        truth.append({"tso": tso, "kind": "ddl", "txn_id": tso, "participants": []})

    def row(cols: list[Column], values: list) -> None:
        tso = 1001 + len(txns)
        tm = TableMapEvent.from_columns(7, "mix", "items", cols, primary_key=[0])
        body = RowsEvent.from_rows(30, 7, cols, [values])
        txns.append([QueryEvent(b"BEGIN", db=b"mix"), tm, body, XidEvent(tso), cts_mark(tso)])
        truth.append({"tso": tso, "kind": "txn", "txn_id": tso, "participants": [1]})

    ddl(
        "CREATE TABLE mix.items (id INT UNSIGNED PRIMARY KEY, qty INT NOT NULL, "
        "label VARCHAR(64) CHARACTER SET utf8mb4 NULL)"
    )
    row(OLD, [1, 1, b"one"])
    ddl("ALTER TABLE mix.items ADD COLUMN extra INT NULL")
    row(after_alter, [2, 1, b"two", 7][: len(after_alter)])
    ddl("ALTER TABLE `items` DROP COLUMN extra, MODIFY COLUMN label VARCHAR(96) CHARSET utf8mb4")
    row(after_modify, [3, 1, b"three"])
    with BinlogWriter(directory, fsync=FsyncPolicy.never(), server_id=77) as w:
        for txn in txns:
            w.append_transaction(txn)
    return truth


def verify(directory: Path, truth: list):
    with serve_files(directory, "binlog") as (port, user, password):
        read = read_server("127.0.0.1", port, user, password)
    return check(read, truth)


def test_passes_when_every_rows_event_has_the_replayed_columns(tmp_path):
    report = verify(tmp_path, write_binlog(tmp_path, NEW, WIDE))
    assert report.ok, report.render()
    line = next(x for x in report.render().splitlines() if x.startswith("rows match the DDL"))
    assert "ok" in line and "3 rows events checked" in line, line


def test_fails_naming_the_transaction_table_and_columns(tmp_path):
    truth = write_binlog(tmp_path, OLD, OLD)  # the ALTERs never reached the rows
    report = verify(tmp_path, truth)
    text = report.render()
    assert not report.ok and "FAIL (2)" in text, text
    # Every other check is satisfied: only the column sets are wrong.
    assert [c.name for c in report.checks if c.violations] == ["rows match the DDL history"]
    added, modified = report.violations
    assert added.startswith(f"TSO {truth[4]['tso']} (CTS mark at binlog.000001:"), added
    assert "write rows of mix.items at binlog.000001:" in added, added
    assert (
        "the DDL history has 4 columns (id INT, qty INT, label VARCHAR(64) (256 bytes), "
        "extra INT) but the rows event has 3 and its TABLE_MAP 3 "
        "(id LONG, qty LONG, label VARCHAR (256 bytes))"
    ) in added, added
    assert "the schema is the one of the DDL at TSO 1003" in added, added
    assert (
        "column 3 label: expected VARCHAR(96) (384 bytes), found label VARCHAR (256 bytes)"
        in modified
    ), modified
    assert f"TSO {truth[6]['tso']} " in modified, modified


def test_replay_follows_the_ddl_mix_cycle_and_gives_up_honestly():
    from cdc_equipment.cn.workloads.ddl_mix import DDL_CYCLE

    s = LogicalSchema()
    s.apply(
        "CREATE TABLE mix.items (id INT UNSIGNED PRIMARY KEY, qty INT NOT NULL, "
        "label VARCHAR(64) CHARACTER SET utf8mb4 NULL)",
        "",
        "create",
    )
    shapes = []
    for sql in DDL_CYCLE:
        s.apply(sql.format(db="mix"), "", sql)
        shapes.append([(c.name, c.sql_type) for c in s.columns("mix", "items").columns])
    assert shapes[0][-1] == ("extra", "INT")
    assert shapes[2][2] == ("label", "VARCHAR(96) (384 bytes)")
    assert shapes[-1] == [("id", "INT"), ("qty", "INT"), ("label", "VARCHAR(64) (256 bytes)")]
    assert s.columns("mix", "scratch") is None and not s.unknown
    # Positions: FIRST / AFTER / CHANGE / RENAME COLUMN, and a table renamed by ALTER.
    s.apply("ALTER TABLE mix.items ADD COLUMN a INT FIRST, ADD COLUMN b BIGINT AFTER qty", "", "x")
    s.apply("ALTER TABLE mix.items CHANGE qty q SMALLINT, RENAME COLUMN b TO bb", "", "x")
    s.apply("ALTER TABLE mix.items RENAME TO mix.things", "", "x")
    assert [(c.name, c.sql_type) for c in s.columns("mix", "things").columns] == [
        ("a", "INT"),
        ("id", "INT"),
        ("q", "SMALLINT"),
        ("bb", "BIGINT"),
        ("label", "VARCHAR(64) (256 bytes)"),
    ]
    # A statement it cannot follow: the table is unknown (not checked), with the reason.
    s.apply("ALTER TABLE mix.things EXCHANGE PARTITION p0 WITH TABLE mix.other", "", "at X")
    assert s.columns("mix", "things") is None
    assert s.unknown[("mix", "things")].startswith("at X: ALTER TABLE … EXCHANGE")
