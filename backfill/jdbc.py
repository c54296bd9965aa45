"""Reading the physical shards with Spark's JDBC source and MariaDB Connector/J (Debian's
`libmariadb-java`): rows are decoded and written in the JVM, never as Python objects.

Each shard is split by ranges of the first primary-key column (when it is an integer) into
chunks of about `chunk_rows` rows; each chunk is one Spark partition, one plain `SELECT ...
WHERE range` on a connection of its own: an InnoDB consistent read, no locks. Together the
ranges cover every value (the first and last are open), so the chunks read exactly what a single
`SELECT *` of the shard would have read at their moments; docs/backfill.md says why any moment
between the watermarks is fine.
"""

from __future__ import annotations

import math
import os
from functools import reduce
from pathlib import Path

import pymysql

from backfill.columns import INT_BYTES, ColumnSpec, jdbc_type
from backfill.errors import BackfillError
from backfill.tables import Shard, TableSpec

# Debian's libmariadb-java (MariaDB Connector/J 2.7); CDC_JDBC_JAR points elsewhere.
DEFAULT_JAR = "/usr/share/java/mariadb-java-client.jar"
DRIVER = "org.mariadb.jdbc.Driver"
FETCH_ROWS = 10_000  # Connector/J streams the result in batches of this many rows


def driver_jar() -> str:
    jar = os.environ.get("CDC_JDBC_JAR", DEFAULT_JAR)
    if not Path(jar).is_file():
        raise BackfillError(
            f"MariaDB Connector/J not found at {jar}: install Debian's libmariadb-java "
            "(`make setup` does) or set CDC_JDBC_JAR to a mariadb-java-client jar"
        )
    return jar


def url(shard: Shard) -> str:
    # Spark picks its MySQL dialect (backtick quoting) by the jdbc:mysql prefix, which
    # Connector/J 2.x accepts too. TIMESTAMPs are read in UTC, as the binlog has them.
    return (
        f"jdbc:mysql://{shard.host}:{shard.port}/?sessionVariables=time_zone='+00:00'"
        "&connectTimeout=10000"
    )


def chunk_predicates(spec: TableSpec, shard: Shard, chunk_rows: int) -> list[str]:
    """WHERE clauses that together cover the shard, about `chunk_rows` rows each (by the
    server's row estimate and the key's min and max; only a first key column that is an integer
    is split, otherwise the shard is one chunk)."""
    first = spec.primary_key[0]
    column = next(c for c in spec.columns if c.name == first)
    if column.base not in INT_BYTES:
        return ["1=1"]
    try:
        conn = shard.connect()
    except pymysql.err.MySQLError as exc:
        raise BackfillError(f"{shard.where}: {exc}") from None
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT MIN(`{first}`), MAX(`{first}`) FROM {shard.qualified}")
            low, high = cur.fetchone()
            cur.execute(
                "SELECT TABLE_ROWS FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (shard.db, shard.table),
            )
            estimate = (cur.fetchone() or (0,))[0] or 0
    finally:
        conn.close()
    if low is None:
        return ["1=1"]
    chunks = max(1, min(math.ceil(estimate / max(chunk_rows, 1)), int(high) - int(low) + 1))
    bounds = [int(low) + (int(high) - int(low) + 1) * i // chunks for i in range(1, chunks)]
    if not bounds:
        return ["1=1"]
    col = f"`{first}`"
    preds = [f"{col} < {bounds[0]}"]
    preds += [f"{col} >= {a} AND {col} < {b}" for a, b in zip(bounds, bounds[1:], strict=False)]
    preds.append(f"{col} >= {bounds[-1]}")
    return preds


# DATETIME and TIMESTAMP travel as microseconds since the epoch (computed by the DN in the
# session's UTC): measured, parsing their text in the JVM cost a quarter of the read.
EPOCH_MICROS = "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', `{c}`)"
ZERO_DATE = -(1 << 63)  # what a zero date (no instant at all) is sent as: an error in the JVM


def _as_micros(c: ColumnSpec) -> bool:
    return c.base in ("datetime", "timestamp")


def custom_schema(columns: tuple[ColumnSpec, ...], where: str) -> str:
    return ", ".join(
        f"`{c.name}` {'BIGINT' if _as_micros(c) else jdbc_type(c, where)}" for c in columns
    )


def source(spec: TableSpec, shard: Shard) -> str:
    """The shard as the JDBC source reads it: the table itself, or a derived table (merged by
    the server into the query, so the chunk ranges still use the primary key)."""
    if not any(_as_micros(c) for c in spec.columns):
        return shard.qualified
    cols = []
    for c in spec.columns:
        if _as_micros(c):
            micros = EPOCH_MICROS.format(c=c.name)
            cols.append(
                f"IF(`{c.name}` IS NOT NULL AND {micros} IS NULL, {ZERO_DATE}, {micros}) "
                f"AS `{c.name}`"
            )
        else:
            cols.append(f"`{c.name}`")
    return f"(SELECT {', '.join(cols)} FROM {shard.qualified}) AS `shard`"


def _time_micros(F, col):
    """'-838:59:59.000000' → microseconds (Spark has no TIME type)."""
    text = F.regexp_replace(col, "^-", "")
    parts = F.split(text, ":")
    micros = (
        parts[0].cast("bigint") * 3_600_000_000
        + parts[1].cast("bigint") * 60_000_000
        + (parts[2].cast("decimal(9,6)") * 1_000_000).cast("bigint")
    )
    return F.when(col.startswith("-"), -micros).otherwise(micros)


def _fix(F, spec: TableSpec, df):
    """The columns read as text or microseconds become their stored types
    (`columns.stored_type`)."""
    out = []
    for c in spec.columns:
        col = F.col(f"`{c.name}`")
        if c.base == "float":
            col = col.cast("double")
        elif c.base == "time":
            col = _time_micros(F, col)
        elif _as_micros(c):
            zero = F.raise_error(
                F.lit(f"{spec.qualified}.{c.name} holds a zero date (unsupported)")
            )
            col = F.when(col == ZERO_DATE, zero).otherwise(F.timestamp_micros(col))
            if c.base == "datetime":
                col = col.cast("timestamp_ntz")  # the session zone is UTC: the wall clock
        out.append(col.alias(c.name))
    return df.select(*out)


def read_table(spark, spec: TableSpec, chunk_rows: int) -> tuple[object, int]:
    """A DataFrame of every shard of the table, one partition per chunk; → (frame, chunks)."""
    from pyspark.sql import functions as F

    schema = custom_schema(spec.columns, spec.qualified)
    frames, chunks = [], 0
    for shard in spec.shards:
        preds = chunk_predicates(spec, shard, chunk_rows)
        chunks += len(preds)
        props = {
            "user": shard.user,
            "password": shard.password,
            "driver": DRIVER,
            "fetchsize": str(FETCH_ROWS),
            "customSchema": schema,
        }
        frames.append(
            spark.read.jdbc(url(shard), source(spec, shard), predicates=preds, properties=props)
        )
    return _fix(F, spec, reduce(lambda a, b: a.unionByName(b), frames)), chunks
