"""`cdc backfill`: the snapshot of logical tables as of TSO T (docs/backfill.md).

1. Low watermark L through the CN; T = L for `latest`; wait until L is in the global binlog, so
   every transaction at or below T is committed on its DN before any read starts.
2. Spark tasks read every physical shard in primary-key chunks (plain SELECTs, no locks).
3. High watermark H through the CN: any transaction a read saw has a TSO below H.
4. Scan the global binlog from T to H: for each key changed in (T, H), its state at T is the
   before-image of its first change. Drop those keys from the parts, add their rows at T.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from backfill import global_binlog, watermarks
from backfill.dataset import FORMATS, Manifest, TableOutput, table_dir
from backfill.errors import BackfillError
from backfill.global_binlog import Dumper
from backfill.reconcile import PartTask, reconcile_part, write_patch
from backfill.shard_reader import PROGRESS_DIR, ShardResult, ShardTask, read_shard
from backfill.tables import TableSpec, check_dns_up, load_catalogue, resolve
from cdc.config import Config
from merge_source.dump_client import BinlogPosition


@dataclass(slots=True)
class Options:
    out: Path
    dumper: Dumper
    tso: int | None = None  # None: latest (the low watermark)
    tables: list[str] | None = None  # None: every logical table
    fmt: str = "parquet"
    master: str = "local[2]"
    chunk_rows: int = 50_000
    timeout: float = 120.0  # waiting for the global binlog to reach a watermark
    progress: bool = True


def spark_session(master: str):
    """A Spark session whose Python workers run this interpreter (so they import this project)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("cdc-backfill")
        .config("spark.ui.enabled", "false")  # no UI port to clash with other jobs
        .config("spark.ui.showConsoleProgress", "false")  # our progress line has rows/s
        .config("spark.task.maxFailures", "1")  # a failed read must be re-planned, not retried
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class Progress:
    """Sums the per-shard progress files every second; one line on stderr each 2 s."""

    def __init__(self, out: Path, shards: int, enabled: bool):
        self.dir = out / PROGRESS_DIR
        self.shards = shards
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="backfill-progress")
        self.started = time.monotonic()

    def __enter__(self) -> Progress:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for f in self.dir.glob("*"):
            f.unlink()
        self.dir.rmdir()

    def totals(self) -> tuple[int, int]:
        import json

        rows = done = 0
        for f in self.dir.glob("*.json"):
            try:
                state = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            rows += state["rows"]
            done += bool(state["done"])
        return rows, done

    def line(self) -> str:
        rows, done = self.totals()
        elapsed = max(time.monotonic() - self.started, 1e-6)
        return (
            f"backfill: {rows:,} rows read, {rows / elapsed:,.0f} rows/s, "
            f"{done}/{self.shards} shards done"
        )

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            print(self.line(), file=sys.stderr, flush=True)


def _collect(rdd, what: str) -> list:
    try:
        return rdd.collect()
    except Exception as exc:  # noqa: BLE001 - Py4J wraps the task's error; keep its last line
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        detail = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines else "")
        raise BackfillError(f"a Spark task failed while {what}: {detail.strip()}") from None


def read_all(spark, specs: list[TableSpec], opts: Options) -> list[ShardResult]:
    tasks = [
        ShardTask(spec, shard, str(opts.out), opts.fmt, opts.chunk_rows)
        for spec in specs
        for shard in spec.shards
    ]
    for spec in specs:
        table_dir(opts.out, spec.db, spec.name).mkdir(parents=True, exist_ok=True)
    rdd = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(read_shard)
    with Progress(opts.out, len(tasks), opts.progress) as progress:
        results = _collect(rdd, "reading the shards")
        if opts.progress:
            print(progress.line(), file=sys.stderr, flush=True)
    failed = [r for r in results if r.error]
    if failed:
        raise BackfillError(f"reading {failed[0].table} failed: {failed[0].error}")
    return results


def scan_start(config: Config, dumper: Dumper, tso: int, files: list[str]) -> BinlogPosition:
    """The newest global binlog file starting at or before `tso` (GMS file index), else the
    oldest retained file."""
    from topology import gms
    from topology.file_index import FileIndex

    try:
        conn = gms.connect(config.gms)
        try:
            entry = FileIndex(conn, config.pipeline.meta_database).file_for(tso)
        finally:
            conn.close()
    except Exception:  # noqa: BLE001 - the index is only a shortcut
        entry = None
    if entry is not None and entry.file in files:
        return BinlogPosition(entry.file, 4)
    return BinlogPosition(files[0], 4)


def check_retained(dumper: Dumper, tso: int, files: list[str]) -> None:
    if not files:
        raise BackfillError(f"{dumper.where} has no global binlog files yet")
    first = global_binlog.first_mark(dumper, files[0])
    if first is None or (tso, 0) < first:
        since = f"starts at TSO {first[0]}" if first else "has no transaction yet"
        raise BackfillError(
            f"TSO {tso} is older than the retained global binlog (oldest file {files[0]} "
            f"{since}): the changes after {tso} are not all there; use a later TSO or `latest`"
        )


def run(config: Config, opts: Options, spark=None) -> Manifest:
    if opts.fmt not in FORMATS:
        raise BackfillError(f"--format must be one of {FORMATS}, got {opts.fmt!r}")
    if opts.out.exists() and any(opts.out.iterdir()):
        raise BackfillError(f"--out {opts.out} is not empty: give a new directory")
    dumper = opts.dumper
    catalogue = load_catalogue(config)
    check_dns_up(resolve(config, catalogue, opts.tables))
    files = dumper.files()
    if opts.tso is not None:
        check_retained(dumper, opts.tso, files)
    start = dumper.end()  # before the low watermark: its mark comes after this position
    low, catalogue = watermarks.write(config, "low")
    tso = low if opts.tso is None else opts.tso
    if tso > low:
        raise BackfillError(f"TSO {tso} is in the future (the newest TSO is {low})")
    specs = resolve(config, catalogue, opts.tables)
    global_binlog.wait_for(dumper, start, low, opts.timeout)

    opts.out.mkdir(parents=True, exist_ok=True)
    own_session = spark is None
    spark = spark or spark_session(opts.master)
    try:
        started = time.monotonic()
        results = read_all(spark, specs, opts)
        read_s = time.monotonic() - started
        high, after = watermarks.write(config, "high")
        moved = [
            s.qualified
            for s in specs
            if resolve(config, after, [s.qualified])[0].placement != s.placement
        ]
        if moved:
            raise BackfillError(
                f"{moved[0]} moved between DNs during the backfill (scale-out): run it again"
            )
        if opts.tso is not None:
            start = scan_start(config, dumper, tso, files)
        window = global_binlog.scan(dumper, start, tso, high, specs, opts.timeout)
        manifest = _reconcile(spark, specs, results, window, opts, tso, low, high)
    finally:
        if own_session:
            spark.stop()
    manifest.save(opts.out)
    if opts.progress:
        rows = sum(t.rows for t in manifest.tables)
        print(
            f"backfill: {rows:,} rows of {len(specs)} tables at TSO {tso} "
            f"(reads {read_s:.1f}s, {rows / max(read_s, 1e-6):,.0f} rows/s; "
            f"{sum(len(p) for p in window.patches.values())} keys changed during the read)",
            file=sys.stderr,
        )
    return manifest


def _reconcile(spark, specs, results, window, opts, tso, low, high) -> Manifest:
    by_table = {s.qualified: s for s in specs}
    outputs = {
        s.qualified: TableOutput(
            s.db, s.name, [dataclasses.asdict(c) for c in s.columns], list(s.primary_key), s.create
        )
        for s in specs
    }
    tasks = []
    for r in results:
        spec = by_table[r.table]
        outputs[r.table].parts += list(r.parts)
        if window.patches.get(r.table):
            tasks += [
                PartTask(spec, str(table_dir(opts.out, spec.db, spec.name) / p), opts.fmt)
                for p in r.parts
            ]
        else:
            outputs[r.table].rows += r.rows
    if tasks:
        patched = spark.sparkContext.broadcast({t: frozenset(p) for t, p in window.patches.items()})
        rdd = spark.sparkContext.parallelize(tasks, len(tasks)).map(
            lambda task: reconcile_part(task, patched.value[task.spec.qualified])
        )
        for table, kept, _dropped in _collect(rdd, "reconciling with the binlog"):
            outputs[table].rows += kept
    for name, patch in window.patches.items():
        rows = [row for row in patch.values() if row is not None]
        part = write_patch(opts.out, by_table[name], rows, opts.fmt)
        if part:
            outputs[name].parts.append(part)
            outputs[name].rows += len(rows)
    return Manifest(
        tso=tso,
        binlog_file=window.after_snapshot.file,
        binlog_position=window.after_snapshot.pos,
        dumper_host=opts.dumper.host,
        dumper_port=opts.dumper.port,
        format=opts.fmt,
        low_watermark_tso=low,
        high_watermark_tso=high,
        tables=[outputs[s.qualified] for s in specs],
    )
