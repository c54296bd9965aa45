"""`cdc bench big-txn`: one huge CN transaction through the whole pipeline, with its memory.

A throw-away cluster, the pipeline as its own process (`cdc start`, MergeSources as children),
then one CN transaction inserting `--mb` rows of 1 MB over every DN. The pipeline's memory
(its process and every process under it, the MergeSource processes included, sampled every
50 ms; their PSS, which counts a page forked processes share once) is printed next to the
transaction's size, with the time until the global binlog holds it whole. The goal for 1 GB:
peak memory (PSS) of the pipeline ≤ 300 MB: a huge transaction spills at the MergeSource,
crosses to the leader as a handoff file and streams into the binlog file part by part.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.goals import Figures
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster

ROW_BYTES = 1 << 20
WRITE_ROWS_V2 = 30
_HEADER = struct.Struct("<IBIII")


def pss_kb(pid: int) -> int:
    """A process's proportional set size: its private pages plus its share of those it shares
    (forked processes share their parent's pages until they write them: a sum of their RSS
    would count each such page once per process)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Its children, theirs, and so on (the MergeSource processes are the fork server's)."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as f:
                kids = [int(p) for p in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


class RssSampler(threading.Thread):
    """Peak memory (PSS) of a process and all its descendants (summed at each sample), and per
    process."""

    def __init__(self, pid: int, interval: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_total = 0
        self.peak_by_pid: dict[int, int] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            total = 0
            for pid in [self.pid, *descendants(self.pid)]:
                kb = pss_kb(pid)
                total += kb
                self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), kb)
            self.peak_total = max(self.peak_total, total)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def rows_bytes_in_binlog(directory: Path) -> tuple[int, int]:
    """(rows events, their bytes) in the global binlog, walking event headers only."""
    count = size = 0
    for path in sorted(directory.glob("binlog.0*")):
        with open(path, "rb") as f:
            pos = 4
            while True:
                f.seek(pos)
                head = f.read(_HEADER.size)
                if len(head) < _HEADER.size:
                    break
                _, code, _, length, _ = _HEADER.unpack(head)
                if length < 19:
                    break
                if code == WRITE_ROWS_V2:
                    count += 1
                    size += length
                pos += length
    return count, size


async def big_transaction(cfg, mb: int) -> int:
    from cdc_equipment.cn import ComputeNode

    cn = ComputeNode(cfg)
    await cn.start()
    try:
        await cn.execute_ddl(
            "CREATE TABLE big.blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL)",
            shard_key="id",
            partitions=len(cfg.dn) * 2,
        )
        async with cn.transaction() as tx:
            for i in range(mb):
                await tx.execute(
                    f"INSERT INTO big.blobs (id, b) VALUES ({i}, REPEAT('x', {ROW_BYTES}))"
                )
        assert tx.commit_tso is not None
        return tx.commit_tso
    finally:
        await cn.close()


def wait_written(status_file: Path, tso: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the pipeline exited with {proc.returncode}")
        try:
            if json.loads(status_file.read_text()).get("last_tso", 0) >= tso:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the global binlog did not reach TSO {tso} within {timeout:.0f}s")


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench big-txn", description=__doc__)
    p.add_argument("--mb", type=int, default=1024, help="transaction size in MB (1 MB rows)")
    p.add_argument("--dns", type=int, default=2)
    p.add_argument("--spill-mb", type=int, default=64, help="[pipeline] spill_mb")
    p.add_argument("--timeout", type=float, default=1800)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cdc-bench-big-"))
    cluster = throwaway_cluster(work / "cluster", dns=args.dns)
    proc = None
    try:
        from cdc_equipment.cn import init

        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(work / "binlog")
        cfg.dumper.port = free_base_port(0)
        cfg.pipeline.spill_dir = str(work / "spill")
        cfg.pipeline.spill_mb = args.spill_mb
        os.makedirs(cfg.pipeline.spill_dir)
        config_path = work / "cdc.toml"
        cfg.dump(config_path)
        asyncio.run(init(cfg))
        log = open(work / "pipeline.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", "cdc_cli.main", "start", "--config", str(config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        sampler = RssSampler(proc.pid)
        sampler.start()
        started = time.monotonic()
        tso = asyncio.run(big_transaction(cfg, args.mb))
        committed = time.monotonic()
        wait_written(work / "pipeline" / "status.json", tso, proc, args.timeout)
        written = time.monotonic()
        sampler.stop()
        rows, rows_size = rows_bytes_in_binlog(work / "binlog")
        print(f"big-txn bench: one CN transaction of {args.mb} x 1 MB rows over {args.dns} DNs")
        print(f"  CN insert + commit                 {committed - started:7.1f} s")
        print(f"  committed -> whole in the binlog   {written - committed:7.1f} s")
        print(f"  global binlog: {rows:,} rows events, {rows_size / 2**20:,.0f} MB of rows")
        other = "" if args.mb == 1024 else f"ran {args.mb} MB"
        peaks = ", ".join(f"{kb / 1024:.0f}" for kb in sampler.peak_by_pid.values())
        print(f"  peak PSS per process (MB): {peaks}")
        print(
            f"  peak PSS of the pipeline (sum)     {sampler.peak_total / 1024:7.0f} MB"
            f"   {figures.goal('big-txn', sampler.peak_total / 1024, unmeasured=other)}"
        )
        if rows_size < args.mb * ROW_BYTES:
            print("  ERROR: the global binlog holds less than the transaction wrote")
            return 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
