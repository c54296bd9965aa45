"""Second pass, after the global binlog window is known, for a table with keys changed between
T and the high watermark: drop those keys from the parts that hold them and add the rows the
keys had at T (from the binlog) as one more part. The changed keys (small: one per key changed
during the backfill) travel to Spark tasks, one per part; a task reads only the key columns of
its part and, when one of them changed, rewrites the part without those rows (pyarrow
semi/anti-joins). Parts without a changed key are not touched.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from backfill.columns import arrow_schema, stored_schema
from backfill.native import write_part
from backfill.spark_io import run_tasks
from backfill.tables import TableSpec

RECONCILED_PART = "part-reconciled.parquet"


def _stored_table(spec: TableSpec, columns: list[str], rows: list[tuple]) -> pa.Table:
    canonical = arrow_schema(list(spec.columns), spec.qualified)
    stored = stored_schema(list(spec.columns), spec.qualified)
    arrays = [
        pa.array([r[i] for r in rows], canonical.field(name).type).cast(stored.field(name).type)
        for i, name in enumerate(columns)
    ]
    return pa.Table.from_arrays(arrays, schema=pa.schema([stored.field(c) for c in columns]))


def drop_keys(path: str, keys: pa.Table, spec: TableSpec) -> int:
    """In a Spark task: rewrite the part at `path` without the rows whose key is in `keys`;
    → rows dropped."""
    names = keys.column_names
    if pq.read_table(path, columns=names).join(keys, names, join_type="left semi").num_rows == 0:
        return 0
    table = pq.read_table(path)
    kept = table.join(keys, names, join_type="left anti").select(table.column_names)
    write_part(kept.cast(table.schema), path, spec)
    return table.num_rows - kept.num_rows


def reconcile_table(spark, spec: TableSpec, table_dir: Path, patch: dict) -> int:
    """Apply `patch` (key → row at T, or None) to the Parquet parts in `table_dir`; → the change
    in the table's row count. (CSV output is made from the reconciled Parquet afterwards.)"""
    keys = _stored_table(spec, list(spec.primary_key), list(patch))
    parts = sorted(str(p) for p in table_dir.glob("part-*.parquet"))
    removed = sum(run_tasks(spark, _dropper(keys, spec), parts, f"reconciling {spec.qualified}"))
    at_t = [r for r in patch.values() if r is not None]
    names = [c.name for c in spec.columns]
    write_part(_stored_table(spec, names, at_t), str(table_dir / RECONCILED_PART), spec)
    return len(at_t) - removed


def _dropper(keys: pa.Table, spec: TableSpec):
    return lambda path: drop_keys(path, keys, spec)
