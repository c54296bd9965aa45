"""`cdc backfill`: the snapshot of logical tables as of TSO T (docs/backfill.md).

1. Low watermark L through the CN; T = L for `latest`; wait until L is in the global binlog, so
   every transaction at or below T is committed on its DN before any read starts.
2. Spark reads every physical shard in key-range chunks over JDBC (plain SELECTs, no locks)
   and writes the parts, all in the JVM.
3. High watermark H through the CN: any transaction a read saw has a TSO below H.
4. Scan the global binlog from T to H: for each key changed in (T, H), its state at T is the
   before-image of its first change. A Spark anti-join drops those keys from the parts that
   hold them; their rows at T are added.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from backfill import global_binlog, watermarks
from backfill.dataset import FORMATS, Manifest, TableOutput, list_parts, table_dir
from backfill.errors import BackfillError
from backfill.global_binlog import Dumper
from backfill.jdbc import driver_jar
from backfill.reconcile import reconcile_table
from backfill.spark_io import as_written, spark_failure, write
from backfill.tables import TableSpec, check_dns_up, load_catalogue, resolve
from cdc.config import Config
from merge_source.dump_client import BinlogPosition

STAGE = "_stage"  # under --out: CSV's Parquet stage and the reconciliation's work files


@dataclass(slots=True)
class Options:
    out: Path
    dumper: Dumper
    tso: int | None = None  # None: latest (the low watermark)
    tables: list[str] | None = None  # None: every logical table
    fmt: str = "parquet"
    master: str = "local[2]"
    chunk_rows: int = 200_000  # rows per JDBC read (a Spark task) and per part
    timeout: float = 120.0  # waiting for the global binlog to reach a watermark
    progress: bool = True


def spark_session(master: str):
    """A lean Spark session with MariaDB Connector/J on its class path; its JVM (and the
    executors') run in UTC so that JDBC reads TIMESTAMP and DATETIME without shifting them."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    utc = "-Duser.timezone=UTC"
    builder = (
        SparkSession.builder.master(master)
        .appName("cdc-backfill")
        .config("spark.jars", driver_jar())
        .config("spark.driver.extraJavaOptions", utc)
        .config("spark.executor.extraJavaOptions", utc)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.catalogImplementation", "in-memory")  # no Hive
        .config("spark.sql.shuffle.partitions", "4")  # the only shuffles are small key sets
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # Connector/J reports ENUM/SET as CHAR(n): Spark would pad them (and CHARs) to n.
        .config("spark.sql.readSideCharPadding", "false")
        .config("spark.ui.enabled", "false")  # no UI port to clash with other jobs
        .config("spark.ui.showConsoleProgress", "false")  # our progress line says more
        .config("spark.task.maxFailures", "1")  # a failed read must be re-planned, not retried
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkStarter:
    """Starts the Spark session in a thread, so the JVM boots while the driver writes the low
    watermark and waits for the binlog (seconds of fixed cost that would otherwise add up)."""

    def __init__(self, master: str):
        self.session = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.seconds = 0.0
        self._thread = threading.Thread(
            target=self._run, args=(master,), daemon=True, name="spark-start"
        )
        self._thread.start()

    def _run(self, master: str) -> None:
        try:
            self.session = spark_session(master)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            self.error = exc
        self.seconds = time.monotonic() - self.started

    def get(self):
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.session

    def stop(self) -> None:
        self._thread.join()
        if self.session is not None:
            self.session.stop()


class Progress:
    """One line on stderr every 2 s: chunks read so far (Spark's status tracker; a JDBC chunk
    reports when its task ends)."""

    def __init__(self, spark, what: str, chunks: int, enabled: bool):
        self.tracker = spark.sparkContext.statusTracker()
        self.what, self.chunks, self.enabled = what, chunks, enabled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="backfill-progress")
        self.started = time.monotonic()

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            done = 0
            for stage in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage)
                done += info.numCompletedTasks if info else 0
            print(
                f"backfill: {self.what}: {done}/{self.chunks} chunks read, "
                f"{time.monotonic() - self.started:.0f}s",
                file=sys.stderr,
                flush=True,
            )


def parquet_dir(opts: Options, spec: TableSpec) -> Path:
    """Where the reads land: the output itself, or for CSV a Parquet stage that is reconciled
    and then converted (Spark cannot re-read its CSV exactly)."""
    if opts.fmt == "parquet":
        return table_dir(opts.out, spec.db, spec.name)
    return opts.out / STAGE / f"{spec.db}.{spec.name}"


@dataclass(slots=True)
class TableRead:
    spec: TableSpec
    rows: int
    chunks: int


def read_all(spark, specs: list[TableSpec], opts: Options) -> list[TableRead]:
    """Every table read and written as parts, one Spark job per table (the JVM does both)."""
    from backfill.jdbc import read_table

    done = []
    for spec in specs:
        frame, chunks = read_table(spark, spec, opts.chunk_rows)
        with Progress(spark, spec.qualified, chunks, opts.progress):
            try:
                rows = write(frame, "parquet", parquet_dir(opts, spec))
            except Exception as exc:  # noqa: BLE001 - Py4J: a read or write failed in the JVM
                raise spark_failure(exc, f"reading {spec.qualified}") from None
        done.append(TableRead(spec, rows, chunks))
    return done


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
    began = time.monotonic()
    if spark is None:
        driver_jar()  # a missing JDBC driver is an error before any work
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
    starter = SparkStarter(opts.master) if spark is None else None
    try:
        specs = resolve(config, catalogue, opts.tables)
        global_binlog.wait_for(dumper, start, low, opts.timeout)
        opts.out.mkdir(parents=True, exist_ok=True)
        waited = time.monotonic()
        spark = spark or starter.get()
        timings = {"spark_start_wait": time.monotonic() - waited}
        if starter is not None:
            timings["spark_start"] = starter.seconds
        started = time.monotonic()
        reads = read_all(spark, specs, opts)
        timings["read_write"] = time.monotonic() - started
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
        scanned = time.monotonic()
        window = global_binlog.scan(dumper, start, tso, high, specs, opts.timeout)
        timings["binlog_scan"] = time.monotonic() - scanned
        reconciled = time.monotonic()
        manifest = _reconcile(spark, reads, window, opts, tso, low, high)
        timings["reconcile"] = time.monotonic() - reconciled
    finally:
        if starter is not None:
            starter.stop()
    timings["total"] = time.monotonic() - began
    manifest.seconds = {k: round(v, 3) for k, v in timings.items()}
    manifest.save(opts.out)
    if opts.progress:
        rows = sum(t.rows for t in manifest.tables)
        read_s = timings["read_write"]
        print(
            f"backfill: {rows:,} rows of {len(specs)} tables at TSO {tso} "
            f"(read+write {read_s:.1f}s, {sum(r.rows for r in reads) / max(read_s, 1e-6):,.0f} "
            f"rows/s; {sum(len(p) for p in window.patches.values())} keys changed during it)",
            file=sys.stderr,
        )
    return manifest


def _reconcile(spark, reads: list[TableRead], window, opts, tso, low, high) -> Manifest:
    tables = []
    for read in reads:
        spec = read.spec
        out = TableOutput(
            spec.db,
            spec.name,
            [dataclasses.asdict(c) for c in spec.columns],
            list(spec.primary_key),
            spec.create,
            rows=read.rows,
        )
        path = parquet_dir(opts, spec)
        patch = window.patches.get(spec.qualified)
        try:
            if patch:
                work = opts.out / STAGE / "_reconcile" / f"{spec.db}.{spec.name}"
                out.rows += reconcile_table(spark, spec, path, patch, work)
            if opts.fmt == "csv":
                final = table_dir(opts.out, spec.db, spec.name)
                out.rows = write(as_written(spark.read.parquet(str(path)), "csv"), "csv", final)
                path = final
        except Exception as exc:  # noqa: BLE001 - Py4J: a Spark job failed
            raise spark_failure(exc, f"reconciling {spec.qualified} (or writing its CSV)") from None
        out.parts = list_parts(path)
        tables.append(out)
    shutil.rmtree(opts.out / STAGE, ignore_errors=True)
    return Manifest(
        tso=tso,
        binlog_file=window.after_snapshot.file,
        binlog_position=window.after_snapshot.pos,
        dumper_host=opts.dumper.host,
        dumper_port=opts.dumper.port,
        format=opts.fmt,
        low_watermark_tso=low,
        high_watermark_tso=high,
        tables=tables,
    )
