"""`--load mysql://user:pass@host:port`: put a backfill into a MySQL/MariaDB server and say how
to continue from the global binlog right after T (CHANGE MASTER TO ... of the dumper)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pymysql

from backfill.columns import ColumnSpec, arrow_schema
from backfill.dataset import Manifest, read_part, table_dir
from backfill.errors import BackfillError
from cdc import admin_sql
from cdc.sql_literal import sql_identifier

BATCH = 2000


def parse_url(url: str) -> dict:
    u = urlparse(url)
    if u.scheme not in ("mysql", "mariadb") or not u.hostname:
        raise BackfillError(f"--load wants mysql://user:password@host:port, got {url!r}")
    return {
        "host": u.hostname,
        "port": u.port or 3306,
        "user": unquote(u.username or "root"),
        "password": unquote(u.password or ""),
    }


def change_master(manifest: Manifest, user: str, password: str) -> str:
    return (
        f"CHANGE MASTER TO MASTER_HOST='{manifest.dumper_host}', "
        f"MASTER_PORT={manifest.dumper_port}, MASTER_USER='{user}', "
        f"MASTER_PASSWORD='{password}', MASTER_LOG_FILE='{manifest.binlog_file}', "
        f"MASTER_LOG_POS={manifest.binlog_position}, MASTER_USE_GTID=no"
    )


def load(out: Path, url: str) -> dict[str, int]:
    """Create each table (it must not exist yet) and insert its rows; → rows per table."""
    manifest = Manifest.load(out)
    target = parse_url(url)
    where = f"{target['host']}:{target['port']}"
    try:
        conn = admin_sql.connect(
            **target,
            autocommit=False,  # one commit per table
            connect_timeout=10,
            read_timeout=None,  # inserts of a large table may take long
            init_command="SET time_zone = '+00:00'",  # TIMESTAMPs were read in UTC
        )
    except pymysql.err.MySQLError as exc:
        raise BackfillError(f"cannot connect to the load target {where}: {exc}") from None
    loaded = {}
    try:
        with conn.cursor() as cur:
            for t in manifest.tables:
                columns = [ColumnSpec(**c) for c in t.columns]
                schema = arrow_schema(columns, f"{t.db}.{t.table}")
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{t.db}`")
                cur.execute(f"USE `{t.db}`")
                try:
                    cur.execute(t.create)
                except pymysql.err.OperationalError as exc:
                    raise BackfillError(
                        f"{where}: cannot create {t.db}.{t.table} ({exc.args[-1]}); "
                        "load into a server without these tables"
                    ) from None
                names = ", ".join(sql_identifier(c.name) for c in columns)
                sql = (
                    f"INSERT INTO {sql_identifier(t.db)}.{sql_identifier(t.table)} ({names}) VALUES "
                    f"({', '.join(['%s'] * len(columns))})"
                )
                n = 0
                for part in t.parts:
                    table = read_part(table_dir(out, t.db, t.table) / part, schema, manifest.format)
                    rows = [tuple(r.values()) for r in table.to_pylist()]
                    for i in range(0, len(rows), BATCH):
                        cur.executemany(sql, rows[i : i + BATCH])
                    n += len(rows)
                conn.commit()
                loaded[f"{t.db}.{t.table}"] = n
    finally:
        conn.close()
    return loaded
