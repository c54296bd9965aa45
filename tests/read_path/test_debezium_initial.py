"""Debezium's MySQL connector with its default snapshot (`snapshot.mode=initial`, default
locking: FLUSH TABLES WITH READ LOCK, START TRANSACTION WITH CONSISTENT SNAPSHOT, SHOW MASTER
STATUS, SELECT *) and `when_needed`, against the dumper while transfers run: every account
once as a snapshot read (one moment: the total holds), then the changes from the snapshot's
position, each update's before-image equal to the row as the reads and the earlier changes left
it — a change missed or repeated at the boundary breaks that chain."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from tests.read_path.conftest import ACCOUNTS, BALANCE

JARS = Path(sys.prefix) / "share" / "cdc" / "jars"
SOURCE = Path(__file__).parents[1] / "compat" / "java" / "DebeziumDump.java"
CHANGES = 300

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        shutil.which("java") is None or not (JARS / ".done").exists(),
        reason="a JDK or the Debezium jars are missing: run `make setup`",
    ),
]


@pytest.mark.parametrize("mode", ["initial", "when_needed"])
def test_debezium_snapshot_then_stream_exactly_once(snap, mode):
    wanted = ACCOUNTS + CHANGES
    run = subprocess.run(
        ["java", "-cp", f"{JARS}/*", str(SOURCE), "127.0.0.1", str(snap.config.dumper.port)]
        + [DEFAULT_USER, DEFAULT_PASSWORD, str(wanted), "240", mode, "bank.accounts"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert len(events) == wanted
    ops = [e["op"] for e in events]
    assert ops[:ACCOUNTS] == ["r"] * ACCOUNTS and Counter(ops[ACCOUNTS:]) == {"u": CHANGES}
    state = {e["after"]["id"]: e["after"] for e in events[:ACCOUNTS]}
    assert sorted(state) == list(range(ACCOUNTS))
    assert sum(row["balance"] for row in state.values()) == ACCOUNTS * BALANCE
    for e in events[ACCOUNTS:]:
        assert state[e["before"]["id"]] == e["before"], e
        state[e["after"]["id"]] = e["after"]
    assert not snap.traffic_errors
