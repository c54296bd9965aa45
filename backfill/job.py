"""`cdc backfill`: the snapshot of logical tables as of TSO T (docs/backfill.md).

1. Low watermark L through the CN; T = L for `latest`; wait until L is in the global binlog, so
   every transaction at or below T is committed on its DN before any read starts.
2. The driver splits every physical shard into key-range chunks; each Spark task reads one with
   ConnectorX straight into Arrow (a plain SELECT, no locks) and writes its part with pyarrow.
3. High watermark H through the CN: any transaction a read saw has a TSO below H.
4. Scan the global binlog from T to H: for each key changed in (T, H), its state at T is the
   before-image of its first change. Spark tasks drop those keys from the parts that hold them
   (pyarrow anti-joins); their rows at T are added as one more part.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from backfill import global_binlog, watermarks
from backfill.dataset import (
    FORMATS,
    Manifest,
    TableOutput,
    list_parts,
    parquet_to_csv,
    table_dir,
)
from backfill.errors import BackfillError
from backfill.global_binlog import Dumper
from backfill.native import Chunk, plan, read_task, warm_up
from backfill.reconcile import reconcile_table
from backfill.spark_io import TASKS_PER_CORE, run_tasks
from backfill.spark_session import spark_session
from backfill.tables import TableSpec, check_dns_up, load_catalogue, resolve
from cdc.cn_protocol.client import CnConnector
from cdc.config import Config
from cdc.protocol import BinlogPosition

STAGE = "_stage"  # under --out: CSV's Parquet stage


@dataclass(slots=True)
class Options:
    out: Path
    dumper: Dumper
    tso: int | None = None  # None: latest (the low watermark)
    tables: list[str] | None = None  # None: every logical table
    fmt: str = "parquet"
    master: str = "local[2]"
    chunk_rows: int = 200_000  # rows per read (a Spark task) and per part
    timeout: float = 120.0  # waiting for the global binlog to reach a watermark
    progress: bool = True


class SparkStarter:
    """Starts the Spark session in a thread, so the JVM boots (and its Python workers import
    what a task needs) while the driver waits for the binlog and plans the chunks: seconds of
    fixed cost that would otherwise add up."""

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
            sc = self.session.sparkContext
            sc.parallelize(range(sc.defaultParallelism), sc.defaultParallelism).map(
                warm_up
            ).collect()
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
    """One line on stderr every 2 s: tasks done so far (Spark's status tracker; a task reads a
    few consecutive chunks and reports when it ends)."""

    def __init__(self, spark, what: str, chunks: int, enabled: bool):
        self.tracker = spark.sparkContext.statusTracker()
        self.what, self.chunks, self.enabled = what, chunks, enabled
        self.tasks = min(chunks, TASKS_PER_CORE * spark.sparkContext.defaultParallelism)
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
                f"backfill: {self.what}: {done}/{self.tasks} tasks of {self.chunks} chunks done, "
                f"{time.monotonic() - self.started:.0f}s",
                file=sys.stderr,
                flush=True,
            )


def parquet_dir(opts: Options, spec: TableSpec) -> Path:
    """Where the reads land: the output itself, or for CSV a Parquet stage that is reconciled
    and then converted (reconciling rewrites parts, which Parquet does exactly and fast)."""
    if opts.fmt == "parquet":
        return table_dir(opts.out, spec.db, spec.name)
    return opts.out / STAGE / f"{spec.db}.{spec.name}"


@dataclass(slots=True)
class TableRead:
    spec: TableSpec
    rows: int
    chunks: int


def plan_all(specs: list[TableSpec], opts: Options) -> list[tuple[TableSpec, str, Chunk]]:
    """Every chunk of every table, with the directory its part goes to (made here)."""
    work = []
    for spec in specs:
        directory = parquet_dir(opts, spec)
        directory.mkdir(parents=True)
        work += [(spec, str(directory), chunk) for chunk in plan(spec, opts.chunk_rows)]
    return work


def read_all(spark, specs: list[TableSpec], work: list, opts: Options) -> list[TableRead]:
    """Every chunk of every table read and written as a part: one Spark job (tables together,
    so that small tables do not leave a core idle), a few consecutive chunks per task."""
    what = ", ".join(s.qualified for s in specs) if len(specs) <= 3 else f"{len(specs)} tables"
    with Progress(spark, what, len(work), opts.progress):
        done = run_tasks(spark, read_task, work, f"reading {what}")
    rows: dict[str, int] = {}
    for name, n in done:
        rows[name] = rows.get(name, 0) + n
    return [
        TableRead(s, rows.get(s.qualified, 0), sum(1 for w in work if w[0] is s)) for s in specs
    ]


def scan_start(config: Config, dumper: Dumper, tso: int, files: list[str]) -> BinlogPosition:
    """The newest global binlog file starting at or before `tso` (GMS file index), else the
    oldest retained file."""
    from topology import FileIndex, gms

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


def run(config: Config, opts: Options, cn: CnConnector, *, spark=None) -> Manifest:
    """The snapshot `opts` asks for; the watermarks are committed through `cn` (the
    deployment's CN: `functools.partial(cn.connect, config)` for the reference CN)."""
    if opts.fmt not in FORMATS:
        raise BackfillError(f"--format must be one of {FORMATS}, got {opts.fmt!r}")
    if opts.out.exists() and any(opts.out.iterdir()):
        raise BackfillError(f"--out {opts.out} is not empty: give a new directory")
    began = time.monotonic()
    dumper = opts.dumper
    catalogue = load_catalogue(config)
    check_dns_up(resolve(config, catalogue, opts.tables))
    files = dumper.files()
    if opts.tso is not None:
        check_retained(dumper, opts.tso, files)
    # The scan after the reads starts at a position read now: the dumper's retention must keep
    # it (and a past TSO's files) until then.
    hold = dumper.retain(files[0] if opts.tso is not None and files else dumper.end().file).open()
    timings = {"checks": time.monotonic() - began}  # before Spark: a failing check is quick
    # Spark starts now: everything until the reads (watermark, binlog wait, planning) overlaps it.
    starter = SparkStarter(opts.master) if spark is None else None
    try:
        marked = time.monotonic()
        start = dumper.end()  # before the low watermark: its mark comes after this position
        low, catalogue = watermarks.write(cn, "low")
        tso = low if opts.tso is None else opts.tso
        if tso > low:
            raise BackfillError(f"TSO {tso} is in the future (the newest TSO is {low})")
        specs = resolve(config, catalogue, opts.tables)
        global_binlog.wait_for(dumper, start, low, opts.timeout)
        planned = time.monotonic()
        timings["low_watermark"] = planned - marked  # the mark, and its wait in the binlog
        opts.out.mkdir(parents=True, exist_ok=True)
        work = plan_all(specs, opts)  # min/max or key samples from the DNs: before the reads
        waited = time.monotonic()
        timings["plan"] = waited - planned
        spark = spark or starter.get()
        timings["spark_start_wait"] = time.monotonic() - waited
        if starter is not None:
            timings["spark_start"] = starter.seconds
        started = time.monotonic()
        reads = read_all(spark, specs, work, opts)
        timings["read_write"] = time.monotonic() - started
        marked = time.monotonic()
        high, after = watermarks.write(cn, "high")
        timings["high_watermark"] = time.monotonic() - marked
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
        hold.close()
        stopping = time.monotonic()
        if starter is not None:
            starter.stop()
        timings["spark_stop"] = time.monotonic() - stopping
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


def _to_csv(spark, spec: TableSpec, stage: Path, final: Path) -> Path:
    """The reconciled Parquet parts as CSV parts, a task each."""
    final.mkdir(parents=True)
    items = [(str(p), str(final / f"{p.stem}.csv")) for p in sorted(stage.glob("part-*.parquet"))]
    run_tasks(spark, parquet_to_csv, items, f"writing {spec.qualified} as CSV")
    return final


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
        if patch:
            out.rows += reconcile_table(spark, spec, path, patch)
        if opts.fmt == "csv":
            path = _to_csv(spark, spec, path, table_dir(opts.out, spec.db, spec.name))
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
