"""Connections to the GMS (meta database) for the topology stores."""

from __future__ import annotations

import pymysql

from cdc.config import NodeConfig


def connect(node: NodeConfig, database: str | None = None) -> pymysql.Connection:
    return pymysql.connect(
        host=node.host,
        port=node.port,
        user=node.user,
        password=node.password,
        database=database,
        autocommit=True,
        charset="utf8mb4",
        connect_timeout=5,
    )
