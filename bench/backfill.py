"""`cdc bench backfill`: the Spark backfill vs a plain `SELECT *` dump of the same shards.

A cluster of its own (3 DNs), one logical table of N rows (8 partitions) filled straight into
the shards with MariaDB's SEQUENCE engine (the data's history is not what is measured), the
pipeline running. In the same run: `mariadb --quick --batch -e 'SELECT * ...'` of every shard
into a file, one after the other (the plain dump, timed before and after the backfill; the
faster run counts), then `cdc backfill --tso latest` with local[2] to Parquet. Prints rows/s of
both and the end-to-end ratio (goal >= 0.9, bench/goals.py), and the phases of the backfill: Spark's
start (overlapped with the low watermark reaching the binlog and the chunk planning), the read +
Parquet write (ConnectorX and pyarrow in the Spark tasks), the rest. 10 M rows by default: Spark's
start and the other fixed steps (~5 s on an idle 2-core machine) would dominate a smaller table
(3 M rows: a 3 s dump), and a backfill is for tables that are large.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from bench.goals import Figures
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster

DB, TABLE, PARTITIONS = "bench", "items", 8
CREATE = (
    f"CREATE TABLE {DB}.{TABLE} (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, k INT NOT NULL, "
    "name VARCHAR(64) NOT NULL, amount DECIMAL(12,2) NOT NULL, at DATETIME(6) NOT NULL)"
)


async def create_table(cfg) -> list[tuple[int, int]]:
    from cdc_equipment.cn import ComputeNode, init

    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    try:
        await cn.execute_ddl(CREATE, shard_key="id", partitions=PARTITIONS)
        return list(enumerate(cn.catalogue.table(DB, TABLE).placement))
    finally:
        await cn.close()


def fill(cluster, placement, rows: int) -> None:
    """Row id goes to partition CRC32(id) % 8, the CN's hash; not binlogged (not measured)."""
    for part, dn in placement:
        with cluster.dn(dn).connect() as conn, conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"USE {DB}_p")  # the SEQUENCE tables need a current database
            cur.execute(
                f"INSERT INTO {DB}_p.{TABLE}_p{part:04d} SELECT seq, seq % 1000, "
                "CONCAT('item-', seq), seq / 100, '2024-01-01' + INTERVAL seq SECOND "
                f"FROM seq_1_to_{rows} WHERE CRC32(seq) % {PARTITIONS} = {part}"
            )
            conn.commit()


class CpuClock:
    """CPU seconds of this process, its children (the mariadb clients, Spark's JVM and Python
    workers) and the DNs of the bench cluster: on a machine shared with other jobs, wall-clock time says as much about
    the neighbours as about the code; CPU time per row does not."""

    HZ = os.sysconf("SC_CLK_TCK")

    def __init__(self, work: Path):
        self.work = str(work)

    def _proc(self, pid: str) -> tuple[int, str, float]:
        """(parent pid, state, CPU s of the process and of its children it has reaped)."""
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(stat[1]), stat[0], sum(int(v) for v in stat[11:15]) / self.HZ

    def dns(self) -> float:
        total = 0.0
        for d in Path("/proc").iterdir():
            try:
                cmd = (d / "cmdline").read_bytes()
                if b"mariadbd" in cmd and self.work.encode() in cmd:
                    total += self._proc(d.name)[2]
            except (OSError, ValueError, IndexError):
                continue
        return total

    def spark(self) -> float:
        """Spark's processes, alive until this process exits: the JVM and, under it, the Python
        workers that read and write (when they exit their time is in the JVM's reaped time)."""
        parent, cpu = {}, {}
        for d in Path("/proc").iterdir():
            try:
                parent[d.name], _, cpu[d.name] = self._proc(d.name)
            except (OSError, ValueError, IndexError):
                continue
        me, total = os.getpid(), 0.0
        for pid in cpu:
            up = pid
            while up in parent and parent[up] > 1:
                up = str(parent[up])
                if int(up) == me:
                    total += cpu[pid]
                    break
        return total

    def now(self) -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # finished children (clients)
        return sum((own.ru_utime, own.ru_stime, kids.ru_utime, kids.ru_stime)) + self.dns()


def plain_dump(cluster, placement, out: Path) -> float:
    start = time.perf_counter()
    with out.open("wb") as f:
        for part, dn in placement:
            node = cluster.dn(dn)
            subprocess.run(
                [
                    "mariadb",
                    "--quick",
                    "--batch",
                    "-h127.0.0.1",
                    f"-P{node.port}",
                    "-uroot",
                    "-e",
                    f"SELECT * FROM {DB}_p.{TABLE}_p{part:04d}",
                ],
                stdout=f,
                check=True,
            )
    return time.perf_counter() - start


def cdc(*args: str) -> None:
    """The pipeline runs as `cdc start --background`, a process of its own like in production
    (its service wants the main thread, and must not share a GIL with the Spark driver)."""
    subprocess.run([sys.executable, "-m", "cdc_cli.main", *args], check=True, capture_output=True)


def _warm_session(master: str):
    """A Spark session started and its Python workers warmed, as `backfill.job.SparkStarter`
    does, before the timing: what a standing session on a cluster would be."""
    from backfill.job import SparkStarter

    return SparkStarter(master).get()


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    from backfill import Options, run
    from backfill.global_binlog import Dumper
    from cdc_equipment.cn import connect

    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench backfill", description=__doc__)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--chunk-rows", type=int, default=200_000)
    p.add_argument("--master", default="local[2]")
    p.add_argument(
        "--warm",
        action="store_true",
        help="a Spark session started (and warmed) before the backfill is timed, as a cluster's"
        " standing one would be: what the end to end is without Spark's start (not the goal)",
    )
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cdc-bench-backfill-"))
    cluster = throwaway_cluster(work / "cluster", dns=3)
    config_file = work / "cdc.toml"
    try:
        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(work / "binlog")
        cfg.dumper.port = free_base_port(0)
        placement = asyncio.run(create_table(cfg))
        fill(cluster, placement, args.rows)
        cfg.dump(config_file)
        cdc("start", "--background", "--config", str(config_file))
        clock = CpuClock(work)
        cpu0 = clock.now()
        dump_s = plain_dump(cluster, placement, work / "dump.tsv")
        cpu_dump = clock.now() - cpu0
        dumper = Dumper("127.0.0.1", cfg.dumper.port, DEFAULT_USER, DEFAULT_PASSWORD)
        opts = Options(
            out=work / "snapshot",
            dumper=dumper,
            tables=[f"{DB}.{TABLE}"],
            master=args.master,
            chunk_rows=args.chunk_rows,
            progress=False,
        )
        session = _warm_session(args.master) if args.warm else None
        start = time.perf_counter()
        cpu0 = clock.now() + clock.spark()
        manifest = run(cfg, opts, partial(connect, cfg), spark=session)
        total_s = time.perf_counter() - start
        cpu_backfill = clock.now() + clock.spark() - cpu0
        dump2_s = plain_dump(cluster, placement, work / "dump.tsv")
        rows = manifest.tables[0].rows
        best = min(dump_s, dump2_s)
        size = sum(f.stat().st_size for f in (work / "snapshot").rglob("*.parquet"))
        phases = manifest.seconds
        read_s = phases["read_write"]
        print(f"backfill bench: {rows:,} rows, {PARTITIONS} shards on 3 DNs, {args.master}")
        print(
            f"  plain SELECT * (mariadb --quick --batch), shard by shard  {best:6.2f} s  "
            f"{rows / best:>10,.0f} rows/s  (runs: {dump_s:.2f}, {dump2_s:.2f} s)"
        )
        print(
            f"  cdc backfill --tso latest -> Parquet ({size / 1e6:.0f} MB)      {total_s:6.2f} s  "
            f"{rows / total_s:>10,.0f} rows/s  end to end"
        )
        steps = (
            "checks",
            "low_watermark",
            "plan",
            "spark_start_wait",
            "read_write",
            "high_watermark",
        )
        steps += ("binlog_scan", "reconcile", "spark_stop")
        known = sum(phases.get(step, 0.0) for step in steps)
        start_s = f"{phases['spark_start']:.2f} s" if "spark_start" in phases else "before (--warm)"
        print(
            f"    of which: Spark start {start_s} (waited for "
            f"{phases['spark_start_wait']:.2f} s of it), checks {phases['checks']:.2f} s, low "
            f"watermark + its wait in the binlog {phases['low_watermark']:.2f} s, chunk planning {phases['plan']:.2f} s, "
            f"read + Parquet write {read_s:.2f} s ({rows / read_s:,.0f} rows/s), high watermark "
            f"{phases['high_watermark']:.2f} s, binlog scan {phases['binlog_scan']:.2f} s, "
            f"reconcile {phases['reconcile']:.2f} s, Spark stop {phases['spark_stop']:.2f} s, "
            f"other {total_s - known:.2f} s"
        )
        warm = "a Spark session started beforehand (--warm)" if args.warm else ""
        verdict = figures.goal("backfill", best / total_s, unmeasured=warm)
        print(f"  ratio backfill / plain dump, end to end: {best / total_s:.2f} {verdict}")
        print(f"  ratio, read + write phase only (steady state, not the goal): {best / read_s:.2f}")
        print(
            f"  CPU seconds (incl. the DNs): plain dump {cpu_dump:.1f}, backfill {cpu_backfill:.1f}"
            f" (Spark start and JIT included): ratio {cpu_dump / cpu_backfill:.2f}"
        )
        if session is not None:
            session.stop()
    finally:
        if config_file.exists():
            cdc("stop", "--config", str(config_file))
        cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    return 0
