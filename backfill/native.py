"""Reading the physical shards inside Spark's Python tasks with ConnectorX (MySQL protocol →
Arrow in native code) and writing each chunk's part with pyarrow: no row becomes a Python
object, and no JVM decodes or writes rows (docs/backfill.md says why this replaced JDBC).

The driver plans: each shard is split into key-range chunks of about `chunk_rows` rows (`plan`).
A task reads one chunk with one plain `SELECT ... WHERE range` on a connection of its own (an
InnoDB consistent read, no locks), turns the columns into their stored Arrow types
(`columns.stored_type`) and writes `part-NNNNN.parquet`. Together the ranges of a shard cover
every key (the first and last are open), so the chunks read exactly what one `SELECT *` of the
shard would have read at their moments; docs/backfill.md says why any moment between the
watermarks is fine.

Exactness: ConnectorX maps a few MySQL types lossily or not at all, so those are computed by
the DN in the SELECT and converted in Arrow (`column_read`): FLOAT as the server's text (the
shortest decimal, as PyMySQL reads it), DECIMAL beyond 28 digits or 10 decimals as text
(ConnectorX's decimal is 28 digits, scale 10), TIME as microseconds, DATE/DATETIME as days /
microseconds since the epoch (zero dates become a sentinel and stop the run naming the column),
TIMESTAMP by UNIX_TIMESTAMP (zone-free: the stored instant), geometry as its bytes.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
import pymysql
from pymysql.converters import escape_item

from backfill.columns import BINARY, GEOMETRY, INT_BYTES, TEXT, ColumnSpec, stored_schema
from backfill.errors import BackfillError
from backfill.tables import Shard, TableSpec
from cdc.sql_literal import sql_identifier

PARQUET_CODEC = "snappy"  # pyarrow's snappy is cheap (unlike the JVM's) and halves the files
BATCH_ROWS = 65_536  # a chunk streams in batches: the write of one overlaps the read of the next
ZERO_DATE = -(1 << 62)  # what the SELECT sends for a zero date (no instant at all)
CX_DECIMAL = (28, 10)  # ConnectorX decodes DECIMAL exactly up to 28 digits with scale <= 10


def _zero_guarded(value_sql: str, quoted: str) -> str:
    """A date-like value computed by the DN is NULL for a zero date: send a sentinel instead,
    so that it cannot pass for a NULL cell."""
    return f"IF({quoted} IS NOT NULL AND ({value_sql}) IS NULL, {ZERO_DATE}, {value_sql})"


def column_read(col: ColumnSpec, where: str) -> str:
    """The SELECT expression that reads the column exactly (see the module's doc)."""
    name, base = col.name, col.base
    q = sql_identifier(name)
    if base in ("decimal", "numeric"):
        precision, scale = (int(a) for a in (col.args() + ["0", "0"])[:2])
        if precision > 38:
            raise BackfillError(
                f"{where}.{name}: DECIMAL({precision},{scale}) is wider than Spark's 38 digits"
            )
        if precision > CX_DECIMAL[0] or scale > CX_DECIMAL[1]:
            return f"CAST({q} AS CHAR)"
        return q
    if base == "float":
        return f"CAST({q} AS CHAR)"
    if base == "time":
        return f"CAST(TIME_TO_SEC({q}) * 1000000 AS SIGNED)"
    if base == "date":
        return _zero_guarded(f"DATEDIFF({q}, DATE'1970-01-01')", q)
    if base == "datetime":
        micros = f"TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {q})"
        return _zero_guarded(micros, q)
    if base == "timestamp":  # a zero TIMESTAMP reads as 0, which no real TIMESTAMP can be
        return f"CAST(UNIX_TIMESTAMP({q}) * 1000000 AS SIGNED)"
    if base in GEOMETRY:
        return f"CAST({q} AS BINARY)"  # ConnectorX cannot decode the geometry type
    if base in INT_BYTES or base in TEXT or base in BINARY or base in ("year", "double", "real"):
        return q  # ConnectorX reads these exactly
    raise BackfillError(f"{where}.{name}: column type {col.type!r} is not supported")


def to_stored(table: pa.Table, spec: TableSpec) -> pa.Table:
    """ConnectorX's columns → the stored types (`columns.stored_schema`)."""
    schema = stored_schema(list(spec.columns), spec.qualified)
    arrays = []
    for col, array in zip(spec.columns, table.columns, strict=True):
        target = schema.field(col.name).type
        if col.base in ("date", "datetime", "timestamp"):
            array = array.cast(pa.int64())
            zero = ZERO_DATE if col.base != "timestamp" else 0
            if pc.any(pc.equal(array, zero)).as_py():
                raise BackfillError(f"{spec.qualified}.{col.name} holds a zero date (unsupported)")
            if col.base == "date":
                array = array.cast(pa.int32())
        arrays.append(array.cast(target))
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One key range of one shard: one SELECT, one part file (a Spark task reads a few)."""

    part: int  # names the part: part-00007.parquet
    shard: Shard
    where: str  # the range, an SQL predicate

    def url(self) -> str:
        s = self.shard
        return f"mysql://{quote(s.user, safe='')}:{quote(s.password, safe='')}@{s.host}:{s.port}"


def query(spec: TableSpec, chunk: Chunk) -> str:
    cols = ", ".join(
        f"{column_read(c, spec.qualified)} AS {sql_identifier(c.name)}" for c in spec.columns
    )
    return f"SELECT {cols} FROM {chunk.shard.qualified} WHERE {chunk.where}"


def dictionary_columns(spec: TableSpec) -> list[str]:
    """Columns worth Parquet's dictionary encoding: ENUM/SET (few values by definition).
    Elsewhere it cost more than it saved on the bench's data (keys, names, amounts, times):
    twice the write time and a larger file than plain snappy pages."""
    return [c.name for c in spec.columns if c.base in ("enum", "set")]


def write_part(table: pa.Table, path: str, spec: TableSpec) -> None:
    """A whole part, written under a temporary name and renamed: there whole or not at all."""
    import pyarrow.parquet as pq

    pq.write_table(
        table, path + ".tmp", compression=PARQUET_CODEC, use_dictionary=dictionary_columns(spec)
    )
    os.replace(path + ".tmp", path)


def read_chunk(spec: TableSpec, chunk: Chunk, directory: str) -> int:
    """In a Spark task: one chunk streamed into Arrow and written as its part; → rows."""
    import connectorx as cx
    import pyarrow.parquet as pq

    path = os.path.join(directory, f"part-{chunk.part:05d}.parquet")
    schema = stored_schema(list(spec.columns), spec.qualified)
    rows = 0
    try:
        batches = cx.read_sql(
            chunk.url(), query(spec, chunk), return_type="arrow_stream", batch_size=BATCH_ROWS
        )
        with pq.ParquetWriter(
            path + ".tmp",
            schema,
            compression=PARQUET_CODEC,
            use_dictionary=dictionary_columns(spec),
        ) as writer:
            for batch in batches:
                writer.write_table(to_stored(pa.Table.from_batches([batch]), spec))
                rows += batch.num_rows
    except BaseException as exc:  # noqa: BLE001 - a Rust panic arrives as a BaseException
        if os.path.exists(path + ".tmp"):
            os.unlink(path + ".tmp")
        if isinstance(exc, BackfillError):
            raise
        raise BackfillError(
            f"reading {chunk.shard.where} ({chunk.where}): {str(exc).splitlines()[0][:300]}"
        ) from None
    os.replace(path + ".tmp", path)  # a part is there whole or not at all
    return rows


def read_task(item: tuple[TableSpec, str, Chunk]) -> tuple[str, int]:
    """A Spark task of the read job: (spec, directory, chunk) → (table, rows)."""
    spec, directory, chunk = item
    return spec.qualified, read_chunk(spec, chunk, directory)


def _literal(value) -> str:
    return escape_item(value, "utf8mb4")


def key_at_least(cols: list[str], values: tuple) -> str:
    """(k1, k2, ...) >= (v1, v2, ...) spelled out, so that the server's range optimizer reads
    only the range (row-value comparisons are not always turned into ranges)."""
    c, v = sql_identifier(cols[0]), _literal(values[0])
    if len(cols) == 1:
        return f"{c} >= {v}"
    return f"({c} > {v} OR ({c} = {v} AND {key_at_least(cols[1:], values[1:])}))"


def key_below(cols: list[str], values: tuple) -> str:
    c, v = sql_identifier(cols[0]), _literal(values[0])
    if len(cols) == 1:
        return f"{c} < {v}"
    return f"({c} < {v} OR ({c} = {v} AND {key_below(cols[1:], values[1:])}))"


def ranges(cols: list[str], bounds: list[tuple]) -> list[str]:
    """Predicates covering every key: below the first bound, between bounds, from the last."""
    if not bounds:
        return ["1=1"]
    preds = [key_below(cols, bounds[0])]
    preds += [
        f"{key_at_least(cols, a)} AND {key_below(cols, b)}"
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    preds.append(key_at_least(cols, bounds[-1]))
    return preds


def _integer_bounds(cur, shard: Shard, first: str, chunk_rows: int) -> list[tuple]:
    """Evenly spaced values of an integer first key column, by its min/max and the server's
    row estimate (no scan)."""
    q = sql_identifier(first)
    cur.execute(f"SELECT MIN({q}), MAX({q}) FROM {shard.qualified}")
    low, high = cur.fetchone()
    cur.execute(
        "SELECT TABLE_ROWS FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (shard.db, shard.table),
    )
    estimate = (cur.fetchone() or (0,))[0] or 0
    if low is None:
        return []
    low, high = int(low), int(high)
    chunks = max(1, min(math.ceil(estimate / max(chunk_rows, 1)), high - low + 1))
    return [(low + (high - low + 1) * i // chunks,) for i in range(1, chunks)]


def _sampled_bounds(cur, shard: Shard, key: list[str], chunk_rows: int) -> list[tuple]:
    """Every `chunk_rows`-th primary key in key order (one scan of the shard by the DN): for a
    key whose first column is not an integer (strings, binary, dates, composite keys)."""
    cols = ", ".join(sql_identifier(k) for k in key)
    cur.execute(
        f"SELECT {cols} FROM (SELECT {cols}, ROW_NUMBER() OVER (ORDER BY {cols}) AS `_rn` "
        f"FROM {shard.qualified}) AS `_s` WHERE `_rn` % {max(chunk_rows, 1)} = 1 AND `_rn` > 1 "
        f"ORDER BY {cols}"
    )
    return [tuple(r) for r in cur.fetchall()]


def shard_ranges(spec: TableSpec, shard: Shard, chunk_rows: int) -> list[str]:
    key = list(spec.primary_key)
    first = next(c for c in spec.columns if c.name == key[0])
    try:
        conn = shard.connect()
    except pymysql.err.MySQLError as exc:
        raise BackfillError(f"{shard.where}: {exc}") from None
    try:
        with conn.cursor() as cur:
            if first.base in INT_BYTES:
                return ranges(key[:1], _integer_bounds(cur, shard, key[0], chunk_rows))
            return ranges(key, _sampled_bounds(cur, shard, key, chunk_rows))
    finally:
        conn.close()


def plan(spec: TableSpec, chunk_rows: int) -> list[Chunk]:
    """Every shard of the table as chunks (numbered in the table's part names)."""
    chunks = []
    for shard in spec.shards:
        for where in shard_ranges(spec, shard, chunk_rows):
            chunks.append(Chunk(len(chunks), shard, where))
    for c in spec.columns:  # an unsupported type fails here, in the driver, not in a task
        column_read(c, spec.qualified)
    return chunks


def warm_up(_: object) -> int:
    """Run once per Python worker while the driver waits for the binlog: the imports of a task
    (ConnectorX, pyarrow) are paid before the reads start."""
    import connectorx  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    return os.getpid()
