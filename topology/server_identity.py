"""The global binlog's identity in the GMS: its `server_uuid`, the sid of every GTID it writes.

It belongs to the cluster, not to a dumper process or a config file: every HA dumper must
number transactions under the same sid (their copies are byte-identical), and two clusters
must not share one (a consumer that follows both would take one's transactions for the
other's). So it is a random UUID made once, by whichever dumper starts first."""

from __future__ import annotations

import uuid

import pymysql


def server_uuid(conn: pymysql.Connection, database: str = "cdc_meta") -> str:
    """The cluster's server_uuid, made now if this is the first start (the schema must be
    migrated). Several dumpers starting at once agree: the first insert wins."""
    table = f"`{database}`.binlog_server_identity"
    with conn.cursor() as cur:
        cur.execute(f"SELECT server_uuid FROM {table} WHERE id = 1")
        row = cur.fetchone()
        if row is None:
            cur.execute(
                f"INSERT IGNORE INTO {table} (id, server_uuid) VALUES (1, %s)", (str(uuid.uuid4()),)
            )
            conn.commit()
            cur.execute(f"SELECT server_uuid FROM {table} WHERE id = 1")
            row = cur.fetchone()
    conn.commit()
    return str(row[0])
