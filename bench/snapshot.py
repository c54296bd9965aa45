"""`cdc bench snapshot`: `mariadb --quick -e 'SELECT *'` of a logical table through the dumper
(a snapshot read exactly as of a binlog position, docs/snapshot-reads.md) vs the same of its
shards directly, interleaved rounds in one run; rows/s each and the ratio. A second variant
reads while about 5 % of the keys change (CN transactions during the dumper's read: the
changed-keys map and before-images are then on the path).

The direct read is the floor a snapshot read cannot beat: the same rows, no position, no
reconciliation; the goal is a ratio ≥ 0.5. On a shared machine both rates move with the load;
the serving process's CPU time per row (from /proc, Linux) moves much less: it says what a
change to the read's path costs or saves."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from bench.latency import start_pipeline
from local_cluster.testing import free_base_port, scratch_cluster, stop_process

PARTITIONS = 4
BATCH = 5000  # rows per loading transaction
TABLE = "bench.snap"


@dataclass(slots=True)
class Round:
    dumper_s: list[float] = field(default_factory=list)
    dumper_cpu_s: list[float] = field(default_factory=list)  # the serving process's
    direct_s: list[float] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)


async def _load(cfg, rows: int) -> None:
    from cn import ComputeNode

    cn = ComputeNode(cfg)
    await cn.start()
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        await cn.execute_ddl(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT NOT NULL PRIMARY KEY, a INT NOT NULL,"
            " pad VARCHAR(100) NOT NULL, at DATETIME(6) NULL)",
            shard_key="id",
            partitions=PARTITIONS,
        )
        for lo in range(0, rows, BATCH):
            values = ", ".join(
                f"({i}, {i % 977}, 'padding-{i:020d}-xxxxxxxxxxxxxxxxxxxxxxxx', "
                f"'2026-11-25 10:00:00.{i % 999999:06d}')"
                for i in range(lo, min(lo + BATCH, rows))
            )
            async with cn.transaction() as tx:
                await tx.execute(f"INSERT INTO {TABLE} (id, a, pad, at) VALUES {values}")
    finally:
        await cn.close()


async def _change(cfg, keys: list[int], stop: threading.Event, done: list[int]) -> None:
    """UPDATE `keys` (100 per CN transaction) until they are all changed or `stop` is set."""
    from cn import ComputeNode

    cn = ComputeNode(cfg)
    await cn.start()
    try:
        for lo in range(0, len(keys), 100):
            if stop.is_set():
                return
            batch = ", ".join(str(k) for k in keys[lo : lo + 100])
            async with cn.transaction() as tx:
                await tx.execute(f"UPDATE {TABLE} SET a = a + 1 WHERE id IN ({batch})")
            done[0] += len(keys[lo : lo + 100])
    finally:
        await cn.close()


def _mariadb(host: str, port: int, user: str, password: str, sql: str) -> int:
    """Rows of `sql` read by `mariadb --quick` (the C client, streaming: the same reader for
    both sides, so the figures compare the servers)."""
    out = subprocess.run(
        ["mariadb", "--quick", "-N", "-h", host, "-P", str(port), "-u", user]
        + ([f"-p{password}"] if password else [])
        + ["-e", sql],
        capture_output=True,
        check=True,
    )
    return out.stdout.count(b"\n")


def _through_dumper(cfg, user: str, password: str) -> tuple[int, float]:
    started = time.monotonic()
    n = _mariadb("127.0.0.1", cfg.dumper.port, user, password, f"SELECT * FROM {TABLE}")
    return n, time.monotonic() - started


def _direct(cfg, table) -> tuple[int, float]:
    """`mariadb --quick` of every shard, one after the other (the dumper reads them in one
    statement)."""
    started, n = time.monotonic(), 0
    for dn, physical in table:
        node = next(d for d in cfg.dn if d.id == dn)
        n += _mariadb(node.host, node.port, node.user, node.password, f"SELECT * FROM {physical}")
    return n, time.monotonic() - started


def _serve_pid(pipeline_pid: int) -> int | None:
    """The pid of `cdc start`'s serving process (`dumper/server/serve_process.py`)."""
    try:
        children = Path(f"/proc/{pipeline_pid}/task/{pipeline_pid}/children").read_text().split()
        for child in children:
            if b"serve_process" in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
    except OSError:
        pass
    return None


def _cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of `pid` so far (0 where /proc has none)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _shards(cfg) -> list[tuple[int, str]]:
    from cdc.cn_protocol import dn_pool
    from cdc.cn_protocol.catalogue_store import CatalogueStore

    async def load():
        store = CatalogueStore(lambda: dn_pool.connect(cfg.gms), cfg.cn.catalogue_database)
        catalogue = await store.load()
        db, name = TABLE.split(".")
        t = catalogue.table(db, name)
        return [(dn, t.physical_name(i)) for i, dn in enumerate(t.placement)]

    return asyncio.run(load())


def _until_merging(status: Path, timeout: float = 60) -> None:
    """Until the watermarks move (start-up recovery is over: a CN may write)."""
    deadline = time.monotonic() + timeout
    while not json.loads(status.read_text()).get("low_watermark_tso"):
        if time.monotonic() > deadline:
            raise RuntimeError("the pipeline did not start merging")
        time.sleep(0.2)


def run(rows: int, rounds: int, change_share: float) -> dict[str, Round]:
    from cdc.config import load
    from local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER

    results = {"idle": Round(), "changing": Round()}
    with scratch_cluster("cdc-bench-snapshot-", 2) as (work, cluster):
        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(work / "binlog")
        cfg.dumper.port = free_base_port(0)
        for user in cfg.dumper.users:
            user.select = True
        config_path = work / "cdc.toml"
        cfg.dump(config_path)
        cfg = load(config_path)
        from cn import init

        asyncio.run(init(cfg))
        with open(work / "pipeline.log", "ab") as log:
            pipeline = start_pipeline(config_path, work / "pipeline", log)
        try:
            _until_merging(work / "pipeline" / "status.json")
            asyncio.run(_load(cfg, rows))
            table = _shards(cfg)
            serve = _serve_pid(pipeline.pid)
            time.sleep(1)  # the load's last transactions reach the global binlog
            for r in range(rounds):  # interleaved: the machine's noise hits both alike
                for variant, result in results.items():
                    n, direct = _direct(cfg, table)
                    assert n == rows, f"direct read: {n} rows, {rows} loaded"
                    stop, done = threading.Event(), [0]
                    changer = None
                    if variant == "changing":
                        keys = random.Random(r).sample(range(rows), int(rows * change_share))
                        changer = threading.Thread(
                            target=asyncio.run, args=(_change(cfg, keys, stop, done),)
                        )
                        changer.start()
                    cpu = _cpu_s(serve)
                    try:
                        n, ours = _through_dumper(cfg, DEFAULT_USER, DEFAULT_PASSWORD)
                        result.dumper_cpu_s.append(_cpu_s(serve) - cpu)
                    finally:
                        stop.set()
                        if changer is not None:
                            changer.join()
                    assert n == rows, f"through the dumper: {n} rows, {rows} loaded"
                    result.direct_s.append(direct)
                    result.dumper_s.append(ours)
                    result.changed.append(done[0])
        finally:
            stop_process(pipeline)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cdc bench snapshot", description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--change", type=float, default=0.05, help="share of keys changed (variant)")
    p.add_argument("--quick", action="store_true", help="20,000 rows, one round")
    args = p.parse_args(argv)
    rows, rounds = (20_000, 1) if args.quick else (args.rows, args.rounds)
    results = run(rows, rounds, args.change)
    print(
        f"snapshot bench: SELECT * of {TABLE}, {rows:,} rows, {PARTITIONS} shards on 2 DNs, "
        f"best of {rounds}"
    )
    print(
        f"  {'variant':<30} {'dumper rows/s':>14} {'direct rows/s':>14} {'ratio':>7} "
        f"{'serve CPU us/row':>17}"
    )
    for variant, r in results.items():
        ours, direct = min(r.dumper_s), min(r.direct_s)
        label = "idle pipeline"
        if variant == "changing":
            label = f"{max(r.changed) / rows:.1%} of keys changing"
        cpu = min(r.dumper_cpu_s) / rows * 1e6
        print(
            f"  {label:<30} {rows / ours:>14,.0f} {rows / direct:>14,.0f} {direct / ours:>7.2f} "
            f"{cpu:>17.2f}"
        )
    print("  ratio dumper/direct (goal >= 0.5); serve CPU: the serving process's, best round")
    return 0
