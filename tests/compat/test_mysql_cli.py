"""The `mariadb` command-line client against the dumper: what an operator types first prints
sensible tables (status, files, events, logical schema)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from cdc.binlog.reader import read_file
from tests.compat.expected import COLUMNS

pytestmark = pytest.mark.skipif(shutil.which("mariadb") is None, reason="mariadb client missing")

STATEMENTS = (
    "SHOW MASTER STATUS; SHOW BINARY LOGS; SHOW BINLOG EVENTS LIMIT 10; "
    "SHOW CREATE TABLE bank.accounts; DESC shop.orders; SHOW TABLES FROM shop"
)


def mariadb(pipeline, sql: str) -> str:
    res = subprocess.run(
        ["mariadb", "-h", pipeline.host, "-P", str(pipeline.port), "-u", pipeline.user]
        + [f"-p{pipeline.password}", "--table", "-e", sql],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_rows(out: str, *header: str) -> list[list[str]]:
    """The rows of the `--table` box whose header row starts with the columns `header`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if tuple(cells(line)[: len(header)]) == header)
    rows = []
    for line in lines[start + 2 :]:  # header, then the +---+ rule
        if line.startswith("+"):
            return rows
        rows.append(cells(line))
    return rows


def test_mariadb_cli_prints_status_files_events_and_schema(pipeline):
    out = mariadb(pipeline, STATEMENTS)
    size = (pipeline.binlog_dir / "binlog.000001").stat().st_size

    executed = table_rows(mariadb(pipeline, "SELECT @@gtid_executed"), "@@gtid_executed")[0][0]
    assert re.fullmatch(r"[0-9a-f-]{36}:1-\d+", executed)
    assert table_rows(out, "File") == [["binlog.000001", str(size), "", "", executed]]
    assert table_rows(out, "Log_name", "File_size") == [["binlog.000001", str(size), "No"]]

    _, reader = read_file(pipeline.binlog_dir / "binlog.000001")
    starts = [(ev.pos, ev.end) for ev in reader][:10]
    events = table_rows(out, "Log_name", "Pos", "Event_type")
    assert [(int(r[1]), int(r[4])) for r in events] == starts
    kinds = [r[2] for r in events]
    assert kinds[:9] == [
        "Format_desc",
        "Previous_gtids",
        "Gtid",
        "Query",
        "Gtid",
        "Query",
        "Rows_query",
        "Gtid",
        "Query",
    ]
    info = [r[5] for r in events]
    uuid = executed.split(":")[0]
    assert info[0] == "Server ver: 5.7.44-cdc-log, Binlog ver: 4"
    assert info[2] == f"SET @@SESSION.GTID_NEXT= '{uuid}:1'"
    assert info[3] == "CREATE DATABASE IF NOT EXISTS `bank`"
    assert info[4] == f"SET @@SESSION.GTID_NEXT= '{uuid}:2'"
    assert info[5].startswith("use `bank`; CREATE TABLE IF NOT EXISTS bank.accounts (")
    assert re.fullmatch(r"# CTS::\d+", info[6]) and info[8] == "BEGIN"

    create = out[out.index("CREATE TABLE `accounts`") :]
    for line in (
        "`id` int(10) unsigned NOT NULL",
        "`balance` bigint(20) NOT NULL",
        "`updated_at` datetime(6) DEFAULT NULL",
        "PRIMARY KEY (`id`)",
    ):
        assert line in create, create

    desc = {r[0]: r[1:] for r in table_rows(out, "Field")}
    assert list(desc) == COLUMNS[("shop", "orders")]
    assert desc["customer_id"][:3] == ["bigint(20) unsigned", "NO", "PRI"]
    assert desc["amount"][:2] == ["decimal(12,2)", "NO"]
    assert desc["status"][0] == "enum('new','paid','shipped','cancelled')"
    assert desc["payload"][:2] == ["blob", "YES"]

    tables = [r[0] for r in table_rows(out, "Tables_in_shop")]
    assert tables == ["currencies", "customers", "order_events", "orders"]
