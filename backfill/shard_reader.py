"""Inside a Spark task: read one physical shard in primary-key chunks and write each chunk as a
part. Each chunk is one plain `SELECT` (InnoDB consistent read: no locks, writers never wait).

PyMySQL rather than Spark's JDBC source: no JDBC jar to ship and match to the cluster, the same
driver (and so the same Python values) as the rest of the project and as the binlog side of the
reconciliation, and the tasks write Arrow directly instead of going through Python-to-JVM rows.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pymysql

from backfill.columns import arrow_schema
from backfill.dataset import part_name, table_dir, write_part
from backfill.tables import Shard, TableSpec

PROGRESS_DIR = "_progress"


@dataclass(frozen=True, slots=True)
class ShardTask:
    spec: TableSpec
    shard: Shard
    out: str
    fmt: str
    chunk_rows: int


@dataclass(frozen=True, slots=True)
class ShardResult:
    table: str
    label: str
    rows: int
    parts: tuple[str, ...]
    error: str = ""


def keyset_predicate(key: tuple[str, ...]) -> str:
    """Rows after a key, spelled out (a > ? OR a = ? AND b > ?): a range scan of the primary key
    on every server version, unlike the row-constructor form."""
    terms = []
    for i, col in enumerate(key):
        eqs = [f"`{k}` = %s" for k in key[:i]]
        terms.append("(" + " AND ".join([*eqs, f"`{col}` > %s"]) + ")")
    return " OR ".join(terms)


def keyset_params(last: tuple) -> list:
    params: list = []
    for i in range(len(last)):
        params += [*last[:i], last[i]]
    return params


def read_shard(task: ShardTask) -> ShardResult:
    spec, shard = task.spec, task.shard
    schema = arrow_schema(list(spec.columns), spec.qualified)
    out = table_dir(Path(task.out), spec.db, spec.name)
    progress = Path(task.out) / PROGRESS_DIR / f"{shard.label}.json"
    cols = ", ".join(f"`{c.name}`" for c in spec.columns)
    order = ", ".join(f"`{k}`" for k in spec.primary_key)
    key_index = spec.key_index
    first = f"SELECT {cols} FROM {shard.qualified} ORDER BY {order} LIMIT %s"
    after = (
        f"SELECT {cols} FROM {shard.qualified} WHERE {keyset_predicate(spec.primary_key)} "
        f"ORDER BY {order} LIMIT %s"
    )
    rows_total, parts, last = 0, [], None
    try:
        conn = shard.connect()
    except pymysql.err.MySQLError as exc:
        return ShardResult(spec.qualified, shard.label, 0, (), f"{shard.where}: {exc}")
    started = time.monotonic()
    try:
        with conn.cursor() as cur:
            while True:
                if last is None:
                    cur.execute(first, (task.chunk_rows,))
                else:
                    cur.execute(after, (*keyset_params(last), task.chunk_rows))
                rows = cur.fetchall()
                if not rows:
                    break
                columns = list(zip(*rows, strict=True))
                arrays = [pa.array(c, f.type) for c, f in zip(columns, schema, strict=True)]
                name = part_name(shard.label, len(parts), task.fmt)
                write_part(out / name, pa.Table.from_arrays(arrays, schema=schema), task.fmt)
                parts.append(name)
                rows_total += len(rows)
                _report(progress, rows_total, time.monotonic() - started)
                if len(rows) < task.chunk_rows:
                    break
                last = tuple(rows[-1][i] for i in key_index)
    except (pymysql.err.MySQLError, pa.ArrowException, OSError) as exc:
        return ShardResult(
            spec.qualified, shard.label, rows_total, tuple(parts), f"{shard.where}: {exc}"
        )
    finally:
        conn.close()
    _report(progress, rows_total, time.monotonic() - started, done=True)
    return ShardResult(spec.qualified, shard.label, rows_total, tuple(parts))


def _report(path: Path, rows: int, seconds: float, done: bool = False) -> None:
    """A tiny file per shard that the driver sums for its progress line (works on any shared
    file system, unlike accumulators, which only arrive when a task ends)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"rows": rows, "seconds": seconds, "done": done}))
    os.replace(tmp, path)
