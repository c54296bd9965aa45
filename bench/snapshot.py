"""`cdc bench snapshot`: `mariadb --quick -e 'SELECT *'` of a logical table through the dumper
(a snapshot read exactly as of a binlog position, docs/snapshot-reads.md) vs the same of its
shards directly, interleaved rounds in one run; rows/s each and the ratio. A second variant
reads while 5 % of the keys change (`--change`): CN transactions after the read's position, so
the changed-keys map and before-images are on the path.

The dumper's read runs in `START TRANSACTION WITH CONSISTENT SNAPSHOT` (its position P pinned
first, docs/snapshot-reads.md "Transactions"): every change committed after P, before the SELECT
or during it, is one the read must undo. The CN's updates are slower than the read (one CN
transaction of 100 keys at a time changed 2.4-5.0 % of the keys before a 300,000-row read
ended), so they start once P is pinned, on several tasks, and the SELECT starts when what is
left would take at most half the idle read's time at their pace so far, the rest changing
during the read. A read that still ended before the last change (their pace fell) is not
counted: the round reads again with half the budget, and its last try changes the whole share
before the SELECT. So every counted read undoes the whole share; the bench prints it.

The shards are also read directly while the same changes run, paced alike (printed, not the
goal): what the changes' own load costs a reader that waits for no watermark.

The direct read is the floor a snapshot read cannot beat: the same rows, no position, no
reconciliation; the goals (bench/goals.py) are a ratio ≥ 0.5, idle and changing. On a shared
machine both rates move with the load; the serving process's CPU time per row (from /proc,
Linux) moves much less: it says what a change to the read's path costs or saves."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from bench.goals import Figures
from bench.latency import start_pipeline
from cdc_equipment.local_cluster.testing import free_base_port, scratch_cluster, stop_process

PARTITIONS = 4
BATCH = 5000  # rows per loading transaction
TABLE = "bench.snap"
CHANGE_TXN_KEYS = 100  # keys per CN transaction of the changes
CHANGERS = 4  # CN transactions at once
CHANGE_TRIES = 4  # reads of a round, until one ends after the whole share changed


@dataclass(slots=True)
class Round:
    dumper_s: list[float] = field(default_factory=list)
    dumper_cpu_s: list[float] = field(default_factory=list)  # the serving process's
    direct_s: list[float] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)  # keys, by the read's end
    changed_before: list[int] = field(default_factory=list)  # of them, before the SELECT
    tries: list[int] = field(default_factory=list)  # reads until one saw the whole share
    # the shards read directly while the same changes run (not the goal: what the load costs)
    direct_changing_s: list[float] = field(default_factory=list)


async def _load(cfg, rows: int) -> None:
    from cdc_equipment.cn import ComputeNode

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


class KeyChanges(threading.Thread):
    """UPDATEs `keys` through a CN of its own, `CHANGE_TXN_KEYS` per transaction on `CHANGERS`
    tasks, until all are changed or `stop()`; `ready` is set once what is left would take at
    most `budget_s` at the pace so far (at once when nothing is left)."""

    def __init__(self, cfg, keys: list[int], budget_s: float) -> None:
        super().__init__(name="snapshot-bench-changes")
        self.cfg, self.keys, self.budget_s = cfg, keys, budget_s
        self.done = 0  # keys whose transaction committed
        self.before = 0  # of them, when the SELECT began
        self.tries = 1  # the reads of the round (_changing_read)
        self.ready = threading.Event()
        self._stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._change())
        except BaseException as e:  # raised again in the bench's thread, by stop()
            self.error = e
        finally:
            self.ready.set()

    def stop(self) -> None:
        self._stopping.set()
        self.join()
        if self.error is not None:
            raise RuntimeError("the snapshot bench's CN changes failed") from self.error

    async def _change(self) -> None:
        from cdc_equipment.cn import ComputeNode

        batches = [
            self.keys[lo : lo + CHANGE_TXN_KEYS] for lo in range(0, len(self.keys), CHANGE_TXN_KEYS)
        ]
        cn = ComputeNode(self.cfg)
        await cn.start()
        started = time.monotonic()

        async def changer() -> None:
            while batches and not self._stopping.is_set():
                batch = batches.pop()
                keys = ", ".join(str(k) for k in batch)
                async with cn.transaction() as tx:
                    await tx.execute(f"UPDATE {TABLE} SET a = a + 1 WHERE id IN ({keys})")
                self.done += len(batch)
                rate = self.done / max(time.monotonic() - started, 1e-6)
                if (len(self.keys) - self.done) / rate <= self.budget_s:
                    self.ready.set()

        try:
            await asyncio.gather(*(changer() for _ in range(CHANGERS)))
        finally:
            await cn.close()


class MariadbClient:
    """`mariadb --quick` (the C client, streaming: the same reader for both sides, so the
    figures compare the servers), connected and past `first` (statements that answer one line)
    when this returns; the statement of `select()` is the one timed. Statements go in on stdin;
    `--unbuffered`: each statement's answer comes out at once."""

    def __init__(
        self, host: str, port: int, user: str, password: str, first: str = "SELECT 1;"
    ) -> None:
        self.proc = subprocess.Popen(
            ["mariadb", "--quick", "--unbuffered", "-N", "-h", host, "-P", str(port), "-u", user]
            + ([f"-p{password}"] if password else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{first}\n".encode())
        self.proc.stdin.flush()
        self.first = self.proc.stdout.readline().split()  # `first`'s answer
        if not self.first:
            self.proc.stdin.close()
            raise RuntimeError(f"{first}: no answer from :{port}: {self.proc.stderr.read()!r}")

    def select(self, sql: str) -> tuple[int, float]:
        """The rows of `sql` and its seconds."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        started = time.monotonic()
        self.proc.stdin.write(f"{sql};\n".encode())
        self.proc.stdin.close()
        out = self.proc.stdout
        n = sum(chunk.count(b"\n") for chunk in iter(lambda: out.read(1 << 16), b""))
        elapsed = time.monotonic() - started
        if self.proc.wait():
            raise RuntimeError(
                f"{sql}: failed on :{self.proc.args[6]}: {self.proc.stderr.read()!r}"
            )
        return n, elapsed


def _pinned(cfg, user: str, password: str) -> MariadbClient:
    """A client of the dumper in `START TRANSACTION WITH CONSISTENT SNAPSHOT`: the read's
    position is pinned (`SHOW MASTER STATUS` says it) when this returns."""
    first = "START TRANSACTION WITH CONSISTENT SNAPSHOT; SHOW MASTER STATUS;"
    return MariadbClient("127.0.0.1", cfg.dumper.port, user, password, first)


def _direct(cfg, table) -> tuple[int, float]:
    """`SELECT *` of every shard, one after the other (the dumper reads them in one statement),
    each on a client connected beforehand, as the dumper's is."""
    clients = []
    for dn, physical in table:
        node = next(d for d in cfg.dn if d.id == dn)
        clients.append((MariadbClient(node.host, node.port, node.user, node.password), physical))
    n = elapsed = 0
    for client, physical in clients:
        rows, seconds = client.select(f"SELECT * FROM {physical}")
        n, elapsed = n + rows, elapsed + seconds
    return n, elapsed


def serve_pid(pipeline_pid: int) -> int | None:
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


@contextlib.contextmanager
def loaded_pipeline(prefix: str, rows: int) -> Iterator[tuple[object, subprocess.Popen]]:
    """A scratch cluster of 2 DNs and `cdc start` on it (its users may read rows), with
    `TABLE` loaded with `rows` rows: (its config, the pipeline's process)."""
    from cdc.config import load

    with scratch_cluster(prefix, 2) as (work, cluster):
        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(work / "binlog")
        cfg.dumper.port = free_base_port(0)
        for user in cfg.dumper.users:
            user.select = True
        config_path = work / "cdc.toml"
        cfg.dump(config_path)
        cfg = load(config_path)
        from cdc_equipment.cn import init

        asyncio.run(init(cfg))
        with open(work / "pipeline.log", "ab") as log:
            pipeline = start_pipeline(config_path, work / "pipeline", log)
        try:
            _until_merging(work / "pipeline" / "status.json")
            asyncio.run(_load(cfg, rows))
            yield cfg, pipeline
        finally:
            stop_process(pipeline)


def _read(cfg, serve: int | None, changes: KeyChanges | None) -> tuple[int, float, float, int]:
    """`SELECT *` through the dumper on a pinned client; with `changes`, they start once the
    position is pinned and the SELECT once they are `ready`: (rows, seconds, the serving
    process's CPU seconds meanwhile, keys changed by the read's end)."""
    from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER

    read = _pinned(cfg, DEFAULT_USER, DEFAULT_PASSWORD)
    if changes is not None:
        changes.start()
        changes.ready.wait()
        changes.before = changes.done
    cpu = _cpu_s(serve)
    try:
        n, seconds = read.select(f"SELECT * FROM {TABLE}")
        done = changes.done if changes is not None else 0
        return n, seconds, _cpu_s(serve) - cpu, done
    finally:
        if changes is not None:
            changes.stop()


def _changing_read(
    cfg, serve: int | None, rows: int, share: float, idle_s: float, r: int
) -> tuple[int, float, float, KeyChanges]:
    """The read while `share` of the keys change after its position, all of them by its end:
    the SELECT starts when what is left would take at most half the idle read's time
    (`idle_s`) at the changes' pace so far. A read that ended before the last change (the
    pace fell: the machine is shared) does not count: it is run again, the budget halved each
    time, and the last try changes every key before the SELECT (still after the position)."""
    keys_total = int(rows * share)
    budget = idle_s / 2
    for attempt in range(1, CHANGE_TRIES + 1):
        if attempt == CHANGE_TRIES:
            budget = 0.0
        keys = random.Random(r * CHANGE_TRIES + attempt).sample(range(rows), keys_total)
        changes = KeyChanges(cfg, keys, budget)
        n, seconds, cpu, done = _read(cfg, serve, changes)
        if done >= keys_total:
            changes.done, changes.tries = done, attempt
            return n, seconds, cpu, changes
        budget /= 2
    raise AssertionError("unreachable: the last try changes every key before the SELECT")


def _direct_changing(cfg, table, rows: int, share: float, direct_s: float, r: int) -> float:
    """The shards read directly while the same share of keys changes, paced as for the dumper's
    read (the rest fits in half the direct read's time): how much the changes' own load (the
    CN, the DNs, the pipeline merging them) slows any reader on this machine. Not the goal."""
    keys = random.Random(-1 - r).sample(range(rows), int(rows * share))
    changes = KeyChanges(cfg, keys, direct_s / 2)
    changes.start()
    changes.ready.wait()
    try:
        n, seconds = _direct(cfg, table)
    finally:
        changes.stop()
    assert n == rows, f"direct read while keys change: {n} rows, {rows} loaded"
    return seconds


def run(rows: int, rounds: int, change_share: float) -> dict[str, Round]:
    results = {"idle": Round(), "changing": Round()}
    with loaded_pipeline("cdc-bench-snapshot-", rows) as (cfg, pipeline):
        table = _shards(cfg)
        serve = serve_pid(pipeline.pid)
        time.sleep(1)  # the load's last transactions reach the global binlog
        for r in range(rounds):  # interleaved: the machine's noise hits both alike
            for variant, result in results.items():
                n, direct = _direct(cfg, table)
                assert n == rows, f"direct read: {n} rows, {rows} loaded"
                if variant == "idle":
                    n, ours, cpu, _ = _read(cfg, serve, None)
                else:
                    n, ours, cpu, changes = _changing_read(
                        cfg, serve, rows, change_share, results["idle"].dumper_s[-1], r
                    )
                    result.changed.append(changes.done)
                    result.changed_before.append(changes.before)
                    result.tries.append(changes.tries)
                    result.direct_changing_s.append(
                        _direct_changing(cfg, table, rows, change_share, direct, r)
                    )
                assert n == rows, f"through the dumper: {n} rows, {rows} loaded"
                result.direct_s.append(direct)
                result.dumper_s.append(ours)
                result.dumper_cpu_s.append(cpu)
    return results


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
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
    changing = results["changing"]
    share = min(changing.changed) / rows  # the least of the rounds, by the read's end
    labels = {"idle": "idle pipeline", "changing": f"{share:.1%} of keys changing"}
    verdicts = []
    for variant, r in results.items():
        ours, direct = min(r.dumper_s), min(r.direct_s)
        cpu = min(r.dumper_cpu_s) / rows * 1e6
        print(
            f"  {labels[variant]:<30} {rows / ours:>14,.0f} {rows / direct:>14,.0f}"
            f" {direct / ours:>7.2f} {cpu:>17.2f}"
        )
        verdict = figures.goal("snapshot", direct / ours, variant)
        verdicts.append(f"  ratio dumper/direct, {labels[variant]}: {direct / ours:.2f} {verdict}")
    print("\n".join(verdicts))
    loaded = min(changing.direct_changing_s)
    print(
        f"  the shards read directly while the same changes run: {rows / loaded:,.0f} rows/s"
        f" ({min(changing.direct_s) / loaded:.2f}x their idle rate; the dumper's changing read"
        f" against it: {loaded / min(changing.dumper_s):.2f}, not the goal)"
    )
    before = min(changing.changed_before) / rows
    print(
        f"  keys changed after the read's position by its end: {share:.1%}"
        f" ({before:.1%} before the SELECT began; the least of the rounds; reads per round"
        f" until one ended after the last change: {', '.join(map(str, changing.tries))})"
        f" {figures.goal('snapshot-changed', share * 100)}"
    )
    print("  serve CPU: the serving process's, best round")
    return 0
