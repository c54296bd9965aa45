"""Connections to the GMS (meta database) for the topology stores, by the one administrative
client (`cdc.admin_sql`): bounded waits; `UNREACHABLE` is what a GMS that went away raises."""

from __future__ import annotations

import pymysql

from cdc.admin_sql import UNREACHABLE
from cdc.admin_sql import connect as _connect
from cdc.config import NodeConfig

__all__ = ["UNREACHABLE", "connect"]


def connect(node: NodeConfig, database: str | None = None) -> pymysql.Connection:
    return _connect(node.host, node.port, node.user, node.password, database)
