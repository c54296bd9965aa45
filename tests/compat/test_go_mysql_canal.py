"""go-mysql's canal (the prebuilt Go program inside the npm package go-mysql-js 0.3.4) follows
the dumper from binlog.000001:4: before its first rows event canal reads the table's schema
from the server (SHOW FULL COLUMNS, SHOW INDEX — a 1064 stopped it there before), then gives
each rows event by logical name with column names. go-mysql-js passes on the first row of each
rows event only (its OnRow takes `event.Rows[0]`), so that is what is compared. Installed by
`make setup` into tests/compat/node/node_modules."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from tests.compat.expected import COLUMNS
from tests.compat.test_zongji import comparable
from tests.e2e.global_binlog import read_global_binlog

NODE_DIR = Path(__file__).parent / "node"
SCRIPT = NODE_DIR / "canal_dump.mjs"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules" / "go-mysql-js").is_dir(),
    reason="node or go-mysql-js missing: run `make setup` (needs node and npm)",
)


def canal(pipeline, wanted: int, timeout: float = 60) -> list[dict]:
    res = subprocess.run(
        ["node", str(SCRIPT), pipeline.host, str(pipeline.port), pipeline.user]
        + [pipeline.password, str(wanted), str(timeout)],
        capture_output=True,
        text=True,
        timeout=timeout + 15,
        cwd=NODE_DIR,
        env={**os.environ, "DEBUG": "mysql_binlog"},  # canal's own log on stderr, for failures
    )
    assert res.returncode == 0, res.stderr + res.stdout[-2000:]
    return [json.loads(line) for line in res.stdout.splitlines()]


def as_js_number(value):
    """A BIGINT beyond 2^53 as node's JSON.parse and JSON.stringify give it: the nearest
    double, written with its shortest digits (29621359419326472 -> 29621359419326470)."""
    if isinstance(value, int) and abs(value) > 1 << 53:
        return int(Decimal(repr(float(value))))
    return value


def test_canal_reads_every_rows_event_by_logical_name(pipeline):
    txns = read_global_binlog(pipeline.binlog_dir)
    expected = [change for txn in txns for change in txn.changes]  # a rows event each
    got = canal(pipeline, len(expected))
    assert len(got) == len(expected)
    kinds = {"write": "insert", "update": "update", "delete": "delete"}
    for event, (db, table, kind, rows) in zip(got, expected, strict=True):
        assert (event["schema"], event["table"]) == (db, table)
        assert kinds[kind] in event, event
        if kind == "update":
            theirs, ours = event["update"]["new"], rows[0][1]
        else:
            theirs, ours = event[kinds[kind]], rows[0]
        assert sorted(theirs) == sorted(COLUMNS[(db, table)]), event  # a Go map: names sorted
        theirs = {name: theirs[name] for name in COLUMNS[(db, table)]}
        if (db, table) == ("shop", "orders") and theirs["payload"] is not None:  # BLOB: base64
            theirs["payload"] = {"hex": base64.b64decode(theirs["payload"]).hex()}
        ours = [as_js_number(v) for v in ours]
        assert comparable(db, table, theirs) == comparable(db, table, ours), (db, table, kind)
    tables = {(e["schema"], e["table"]) for e in got}
    assert {("bank", "accounts"), ("shop", "orders"), ("shop", "order_events")} <= tables
