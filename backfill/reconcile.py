"""Second pass, after the global binlog window is known: drop from each part the rows whose key
changed between T and the high watermark, and add the rows those keys had at T (read from the
binlog). Parts without such a key are left untouched (only their key columns are read)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from backfill.columns import arrow_schema, key_value
from backfill.dataset import part_name, read_part, table_dir, write_part
from backfill.tables import TableSpec


@dataclass(frozen=True, slots=True)
class PartTask:
    spec: TableSpec
    path: str
    fmt: str


def reconcile_part(task: PartTask, patched: frozenset) -> tuple[str, int, int]:
    """→ (table, rows kept, rows dropped)."""
    spec = task.spec
    schema = arrow_schema(list(spec.columns), spec.qualified)
    path = Path(task.path)
    keys = read_part(path, schema, task.fmt, columns=list(spec.primary_key))
    columns = [keys.column(k).to_pylist() for k in spec.primary_key]
    keep = [tuple(key_value(v) for v in key) not in patched for key in zip(*columns, strict=True)]
    dropped = keep.count(False)
    if dropped:
        full = read_part(path, schema, task.fmt)
        write_part(path, full.filter(pa.array(keep, pa.bool_())), task.fmt)
    return spec.qualified, len(keep) - dropped, dropped


def write_patch(out: Path, spec: TableSpec, rows: list[tuple], fmt: str) -> str | None:
    """The rows at T of keys that changed during the read, as one more part."""
    if not rows:
        return None
    schema = arrow_schema(list(spec.columns), spec.qualified)
    arrays = [
        pa.array(list(col), f.type) for col, f in zip(zip(*rows, strict=True), schema, strict=True)
    ]
    name = part_name("binlog", 0, fmt)
    write_part(
        table_dir(out, spec.db, spec.name) / name, pa.Table.from_arrays(arrays, schema=schema), fmt
    )
    return name
