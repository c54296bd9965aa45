"""Second pass, after the global binlog window is known, for a table with keys changed between
T and the high watermark: drop those keys from the parts that hold them and add the rows the
keys had at T (from the binlog). All in the JVM: the changed keys and their rows (small: one per
key changed during the backfill) are written once by pyarrow, then Spark finds the parts holding
such a key (a semi-join on the key columns only), rewrites just those parts with an anti-join,
and adds the rows at T. Parts without a changed key are not touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from backfill.columns import arrow_schema, stored_schema
from backfill.spark_io import write
from backfill.tables import TableSpec


def _stored_table(spec: TableSpec, columns: list[str], rows: list[tuple]) -> pa.Table:
    canonical = arrow_schema(list(spec.columns), spec.qualified)
    stored = stored_schema(list(spec.columns), spec.qualified)
    arrays = [
        pa.array([r[i] for r in rows], canonical.field(name).type).cast(stored.field(name).type)
        for i, name in enumerate(columns)
    ]
    return pa.Table.from_arrays(arrays, schema=pa.schema([stored.field(c) for c in columns]))


def reconcile_table(spark, spec: TableSpec, table_dir: Path, patch: dict, work: Path) -> int:
    """Apply `patch` (key → row at T, or None) to the Parquet parts in `table_dir`; → the change
    in the table's row count. (CSV output is made from the reconciled Parquet afterwards: CSV
    read back by Spark cannot tell '' from NULL.)"""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    work.mkdir(parents=True)
    key_cols = list(spec.primary_key)
    names = [c.name for c in spec.columns]
    pq.write_table(_stored_table(spec, key_cols, list(patch)), work / "keys.parquet")
    at_t = [r for r in patch.values() if r is not None]
    pq.write_table(_stored_table(spec, names, at_t), work / "rows.parquet")

    keys = F.broadcast(spark.read.parquet(str(work / "keys.parquet")))
    parts = spark.read.parquet(str(table_dir)).withColumn("_part", F.input_file_name())
    hits = [
        r[0] for r in parts.join(keys, key_cols, "left_semi").select("_part").distinct().collect()
    ]

    rows_at_t = spark.read.parquet(str(work / "rows.parquet"))
    if hits:
        dropped = Observation()
        old = spark.read.parquet(*hits)
        old = old.observe(dropped, F.count(F.lit(1)).alias("rows"))
        frame = old.join(keys, key_cols, "left_anti").select(*names).unionByName(rows_at_t)
    else:
        dropped, frame = None, rows_at_t
    written = write(frame, "parquet", work / "out")
    removed = int(dropped.get["rows"]) if dropped else 0
    for uri in hits:
        Path(unquote(urlparse(uri).path)).unlink()
    for f in sorted((work / "out").glob("part-*")):
        f.rename(table_dir / f"part-reconciled-{f.name[len('part-') :]}")
    shutil.rmtree(work)
    return written - removed
