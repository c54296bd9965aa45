"""`cdc bench merge-source`: one MergeSource (dump client + group assembly + classification +
sorter) over a pre-generated DN binlog of CN-protocol XA transactions, and, in the same run,
`mariadb-binlog --read-from-remote-server --raw` of the same binlog; prints both rates and the
ratio.

The binlog is generated with the CN's exact statement shapes (XA branch with TraceId hints,
commit record on a second connection, XA COMMIT, heartbeats) without the CN's Python cost.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

import pymysql
from pymysql.constants import CLIENT

from bench.goals import Figures
from bench.raw_dump import raw_dump
from cdc.cn_protocol.schema import PRIVATE_TABLES
from cdc.memory_tune import tune_memory
from cdc.protocol import BinlogPosition, DumpClient, DumpSettings
from cdc_equipment.local_cluster.testing import throwaway_server
from merge_source.fragment import Fragment
from merge_source.processor import SourceProcessor


def generate(server, target_events: int, statements: int = 8) -> tuple[str, int]:
    """CN-style transactions until the binlog holds `target_events`; returns (first file, count)."""

    def connect(flags=0):
        return pymysql.connect(
            host=server.host, port=server.port, user="root", autocommit=True, client_flag=flags
        )

    setup = connect()
    with setup.cursor() as cur:
        for sql in PRIVATE_TABLES:
            cur.execute(sql)
        cur.execute("CREATE DATABASE IF NOT EXISTS bench_p")
        cur.execute(
            "CREATE TABLE IF NOT EXISTS bench_p.t_p0000 (id BIGINT PRIMARY KEY, n INT, s VARCHAR(64))"
        )
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        first = cur.fetchone()[0]
    branch, record = connect(CLIENT.MULTI_STATEMENTS), connect()
    # events per transaction: GTID, 3 per statement, XA END, XA_PREPARE; record 5; commit 2
    per_txn = 2 + 3 * statements + 5 + 2
    tso = 1 << 40
    txn = 0
    with branch.cursor() as b, record.cursor() as r:
        while txn * per_txn < target_events:
            txn += 1
            tso += 3
            xid = f"'cdc-{txn}','1',1"
            body = ";".join(
                f"/*CDC trace={i}.0 cn=1 */ INSERT INTO bench_p.t_p0000 VALUES ({txn * 100 + i}, {i}, 'row {i}')"
                for i in range(1, statements + 1)
            )
            b.execute(f"XA START {xid};{body};XA END {xid};XA PREPARE {xid}")
            while b.nextset():
                pass
            r.execute(
                f"INSERT INTO __cdc__.__cdc_tx_log__ (txn_id, commit_tso, participants, aborted) "
                f"VALUES ({txn}, {tso}, '1', 0)"
            )
            b.execute(f"XA COMMIT {xid}")
    with setup.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    for c in (setup, branch, record):
        c.close()
    return first, txn * per_txn


async def run_source(server, first: str) -> tuple[float, int, int, float]:
    """Dump and process everything from `first`; (seconds, events, fragments, CPU seconds)."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        end_file = cur.fetchone()[0]
    settings = DumpSettings(server.host, server.port, "root", "", server_id=9999, name="bench")
    client = DumpClient(settings, BinlogPosition(first, 4))
    processor = SourceProcessor(1, "bench")
    tune_memory()  # as in a MergeSource process (merge_source/worker.py)
    events = fragments = 0
    start, cpu = time.perf_counter(), time.process_time()
    async for file, batch in client.raw_batches():
        for out in processor.feed_raw(file, batch):  # as MergeSource.run does
            fragments += isinstance(out, Fragment)
        events += len(batch)
        if client.position.file == end_file:
            break
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await client.close()
    return elapsed, events, fragments, cpu


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench merge-source", description=__doc__)
    p.add_argument("--events", type=int, default=1_000_000, help="DN binlog events to generate")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cdc-bench-ms-"))
    server = throwaway_server(work, server_id=1, name="dn1")
    try:
        t0 = time.perf_counter()
        first, _ = generate(server, args.events)
        print(f"generated the DN binlog in {time.perf_counter() - t0:.0f}s")
        best_source = best_raw = best_cpu = float("inf")
        events = fragments = 0
        for r in range(args.rounds):  # interleaved: noise hits both alike
            best_raw = min(
                best_raw, raw_dump(server.port, first, work / f"raw{r}", to_last_log=True)
            )
            elapsed, events, fragments, cpu = asyncio.run(run_source(server, first))
            best_source, best_cpu = min(best_source, elapsed), min(best_cpu, cpu)
        print(
            f"merge-source bench: {events:,} DN events, {fragments:,} fragments, best of {args.rounds}"
        )
        print(f"  mariadb-binlog -R --raw  {best_raw:.2f} s  {events / best_raw:>12,.0f} ev/s")
        print(
            f"  MergeSource              {best_source:.2f} s  {events / best_source:>12,.0f} ev/s"
        )
        # On a loaded machine the wall time of a CPU-bound process is mostly waiting for a core.
        print(f"  MergeSource CPU time     {best_cpu:.2f} s  {events / best_cpu:>12,.0f} ev/s")
        ratio = best_raw / best_source
        verdict = figures.goal("merge-source", ratio)
        print(f"  ratio MergeSource/raw dump: {ratio:.2f} {verdict}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0
