"""`cdc check`: is a downstream (a replica of the global binlog) equal to the logical tables?

1. A token row is committed through the CN (broadcast table `cdc_check.tokens`) and awaited on
   the downstream: everything committed before it has then reached the downstream too.
2. Every logical table is compared by row count and an order-independent checksum,
   `BIT_XOR(CRC32(CONCAT_WS(...)))`, computed on each physical shard (XOR-combined) and on the
   downstream table.
3. On a mismatch, the rows are diffed by primary key in chunks to name the first differences.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import pymysql

from cdc import admin_sql
from cdc.cn_protocol.catalogue import LogicalTable
from cdc.config import Config
from cdc.sql_literal import sql_identifier

TOKEN_DB = "cdc_check"
TOKEN_TABLE = "tokens"


@dataclass(slots=True)
class TableCheck:
    db: str
    table: str
    source_rows: int
    source_sum: int
    downstream_rows: int | None
    downstream_sum: int | None
    differences: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return (self.source_rows, self.source_sum) == (self.downstream_rows, self.downstream_sum)


@dataclass(slots=True)
class CheckReport:
    tables: list[TableCheck]
    token_wait_s: float

    @property
    def equal(self) -> bool:
        return all(t.equal for t in self.tables)

    def render(self) -> str:
        lines = [f"{'TABLE':<32}{'SOURCE ROWS':>12}{'DOWNSTREAM':>12}  RESULT"]
        for t in self.tables:
            down = "-" if t.downstream_rows is None else str(t.downstream_rows)
            lines.append(
                f"{t.db + '.' + t.table:<32}{t.source_rows:>12}{down:>12}  {'equal' if t.equal else 'DIFFERENT'}"
            )
            lines += [f"    {d}" for d in t.differences]
        verdict = "all tables equal" if self.equal else "DIFFERENCES FOUND"
        lines.append(
            f"{verdict} ({len(self.tables)} tables; token reached the downstream in {self.token_wait_s:.1f}s)"
        )
        return "\n".join(lines)


def checksum_sql(columns: list[str], table: str) -> str:
    cols = ", ".join(f"IFNULL(CAST(`{c}` AS CHAR), '\\0')" for c in columns)
    return f"SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS('#', {cols}))), 0) FROM {table}"


async def write_token(config: Config) -> tuple[str, list[LogicalTable], int]:
    from cdc_equipment.cn import ComputeNode

    token = uuid.uuid4().hex
    cn = ComputeNode(config, pool_size=4)
    await cn.start(recover=False)
    try:
        await cn.execute_ddl(
            f"CREATE TABLE IF NOT EXISTS {TOKEN_DB}.{TOKEN_TABLE} (token CHAR(32) NOT NULL PRIMARY KEY, "
            "written_at DATETIME(6) NOT NULL)",
            broadcast=True,
        )
        async with cn.transaction() as tx:
            await tx.execute(
                f"INSERT INTO {TOKEN_DB}.{TOKEN_TABLE} (token, written_at) VALUES (%s, NOW(6))",
                (token,),
            )
        tables = [t for t in cn.catalogue.tables.values() if t.db != TOKEN_DB]
        first_dn = cn.catalogue.dns[0]
    finally:
        await cn.close()
    return token, tables, first_dn


def wait_for_token(downstream: pymysql.Connection, token: str, timeout: float) -> float:
    start = time.monotonic()
    with downstream.cursor() as cur:
        while True:
            try:
                cur.execute(f"SELECT 1 FROM `{TOKEN_DB}`.`{TOKEN_TABLE}` WHERE token=%s", (token,))
                if cur.fetchone():
                    return time.monotonic() - start
            except pymysql.err.ProgrammingError:
                pass  # the token table has not reached the downstream yet
            if time.monotonic() - start > timeout:
                raise TimeoutError(
                    f"the check token did not reach the downstream within {timeout:.0f}s: "
                    "is the pipeline running and the replica replicating (SHOW SLAVE STATUS)?"
                )
            time.sleep(0.2)


def shards(table: LogicalTable, first_dn: int) -> list[tuple[int, int | None]]:
    """(DN, partition) of every physical piece; a broadcast table is read on one DN."""
    if table.is_broadcast:
        return [(first_dn, None)]
    return [(dn, p) for p, dn in enumerate(table.placement)]


def source_checksum(
    config: Config, table: LogicalTable, first_dn: int
) -> tuple[int, int, list[str]]:
    columns = [c["name"] for c in table.schema.get("columns", [])]
    rows, xor = 0, 0
    for dn, partition in shards(table, first_dn):
        node = config.dn_by_id(dn)
        conn = _connect(node.host, node.port, node.user, node.password)
        try:
            with conn.cursor() as cur:
                cur.execute(checksum_sql(columns, table.physical_name(partition)))
                n, x = cur.fetchone()
        finally:
            conn.close()
        rows += int(n)
        xor ^= int(x)
    return rows, xor, columns


def _connect(host: str, port: int, user: str, password: str) -> pymysql.Connection:
    return admin_sql.connect(host, port, user, password, read_timeout=None)


def run_check(
    config: Config,
    host: str,
    port: int,
    user: str = "root",
    password: str = "",
    timeout: float = 120.0,
) -> CheckReport:
    token, tables, first_dn = asyncio.run(write_token(config))
    downstream = _connect(host, port, user, password)
    try:
        waited = wait_for_token(downstream, token, timeout)
        results = []
        for table in sorted(tables, key=lambda t: (t.db, t.name)):
            rows, xor, columns = source_checksum(config, table, first_dn)
            check = TableCheck(table.db, table.name, rows, xor, None, None)
            try:
                with downstream.cursor() as cur:
                    cur.execute(
                        checksum_sql(
                            columns, f"{sql_identifier(table.db)}.{sql_identifier(table.name)}"
                        )
                    )
                    n, x = cur.fetchone()
                check.downstream_rows, check.downstream_sum = int(n), int(x)
            except pymysql.err.MySQLError as exc:
                check.differences.append(f"downstream table unreadable: {exc}")
            if not check.equal and check.downstream_rows is not None:
                check.differences += diff_rows(config, table, first_dn, downstream)
            results.append(check)
    finally:
        downstream.close()
    return CheckReport(results, waited)


def diff_rows(
    config: Config, table: LogicalTable, first_dn: int, downstream, limit: int = 10
) -> list[str]:
    """The first differing rows by full-row comparison (small tables; a hint, not an audit)."""

    def fetch(conn, name):
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {name}")
            return {tuple(r) for r in cur.fetchall()}

    source: set[tuple] = set()
    for dn, partition in shards(table, first_dn):
        node = config.dn_by_id(dn)
        conn = _connect(node.host, node.port, node.user, node.password)
        try:
            source |= fetch(conn, table.physical_name(partition))
        finally:
            conn.close()
    down = fetch(downstream, f"{sql_identifier(table.db)}.{sql_identifier(table.name)}")
    out = [f"only in source: {r}" for r in sorted(source - down, key=repr)[:limit]]
    out += [f"only downstream: {r}" for r in sorted(down - source, key=repr)[:limit]]
    return out
