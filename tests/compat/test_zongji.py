"""zongji (@vlasky/zongji, Node, on mysql2) follows the dumper: every row event of the global
binlog, by logical name, with column names and values; and its start-at-end preamble (SHOW
BINARY LOGS, gtid_executed) is answered. zongji is installed by `make setup` into
tests/compat/node/node_modules (package-lock.json pins it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from tests.compat.expected import COLUMNS
from tests.e2e.global_binlog import read_global_binlog

NODE_DIR = Path(__file__).parent / "node"
SCRIPT = NODE_DIR / "zongji_dump.mjs"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules" / "@vlasky" / "zongji").is_dir(),
    reason="node or zongji missing: run `make setup` (needs node and npm)",
)
KINDS = {"write": "writerows", "update": "updaterows", "delete": "deleterows"}


def zongji(pipeline, *args: str, timeout: float = 30) -> list[dict]:
    res = subprocess.run(
        ["node", str(SCRIPT), pipeline.host, str(pipeline.port), pipeline.user]
        + [pipeline.password, *args],
        capture_output=True,
        text=True,
        timeout=timeout + 10,
        cwd=NODE_DIR,
    )
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def comparable(db: str, table: str, row) -> tuple:
    """Values both decoders give alike: zongji has dicts (big ints and DECIMALs as strings, BLOB
    as {"hex"}), our codec positional rows (strings as bytes)."""
    if isinstance(row, dict):
        values = list(row.values())
        blob = values[9]["hex"] if (db, table) == ("shop", "orders") and values[9] else None
    else:
        values = row
        blob = row[9].hex() if (db, table) == ("shop", "orders") and row[9] is not None else None
    if (db, table) == ("bank", "accounts"):
        return (int(values[0]), int(values[1]))
    if (db, table) == ("shop", "orders"):
        title = values[5].decode() if isinstance(values[5], bytes) else values[5]
        return (int(values[0]), int(values[1]), Decimal(values[2]), values[3], title, blob)
    key = values[0].decode() if isinstance(values[0], bytes) else values[0]
    return (str(key),)


def test_zongji_reads_every_row_event_by_logical_name(pipeline):
    txns = read_global_binlog(pipeline.binlog_dir)
    expected = [change for txn in txns for change in txn.changes]
    got = zongji(pipeline, str(len(expected)), "30")
    assert len(got) == len(expected)
    for event, (db, table, kind, rows) in zip(got, expected, strict=True):
        assert (event["schema"], event["table"], event["event"]) == (db, table, KINDS[kind])
        assert event["columns"] == COLUMNS[(db, table)]
        if kind == "update":
            theirs = [comparable(db, table, r["after"]) for r in event["rows"]]
            ours = [comparable(db, table, after) for _, after in rows]
        else:
            theirs = [comparable(db, table, r) for r in event["rows"]]
            ours = [comparable(db, table, r) for r in rows]
        assert theirs == ours, (db, table, kind)
    tables = {(e["schema"], e["table"]) for e in got}
    assert {("bank", "accounts"), ("shop", "orders"), ("shop", "order_events")} <= tables
    # Text survives the trip: utf8mb4 titles with emoji and CJK.
    titles = {r.get("title") for e in got if e["table"] == "orders" for r in rows_of(e)}
    assert {"emoji 😀🚀", "中文订单"} & titles


def rows_of(event: dict) -> list[dict]:
    return [r["after"] if "after" in r else r for r in event["rows"]]


def test_zongji_start_at_end_uses_show_binary_logs(pipeline):
    (ready,) = zongji(pipeline, "1", "15", "--at-end")
    size = (pipeline.binlog_dir / "binlog.000001").stat().st_size
    assert ready == {"ready": "binlog.000001", "position": size}
