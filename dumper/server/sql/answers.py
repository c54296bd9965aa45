"""What the answers of every subject share: their base (what the server hands the SQL answers,
`SqlContext`, and the session's state) and result columns (unsigned BIGINT ones, text ones, a
SELECT's typed by value)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cdc.config import DumperConfig
from cdc.protocol.constants import ColumnType
from cdc.protocol.resultset import UNSIGNED_FLAG, Column
from dumper.server.sessions import Registration, Sessions, SessionState
from dumper.server.sql.points import PointResolver
from dumper.server.sql.schema import SchemaProvider
from dumper.server.sql.variables import VarValue
from dumper.server.store.consumer_holds import ConsumerHolds
from dumper.server.store.retention import Retention
from dumper.server.store.served import ServedBinlog
from read_path import TableReads

LONGLONG_U = {"type": ColumnType.LONGLONG, "flags": UNSIGNED_FLAG}


def cols(*names: str) -> list[Column]:
    return [Column(n) for n in names]


def value_column(name: str, value: object) -> Column:
    """A SELECT's column, typed by its value (integers and doubles as numbers)."""
    if isinstance(value, bool | int):
        return Column(name, ColumnType.LONGLONG)
    if isinstance(value, float):
        return Column(name, ColumnType.DOUBLE, decimals=31)
    return Column(name)


@dataclass(slots=True)
class SqlContext:
    """What the SQL answers read (server.py builds it once; every session's answers share it)."""

    config: DumperConfig
    served: ServedBinlog  # the files, the writer's progress, the GTIDs they hold
    schema: SchemaProvider
    variables: dict[str, VarValue]  # the server's global variables
    sessions: Sessions  # PROCESSLIST, KILL, Uptime
    replicas: Mapping[int, Registration]  # SHOW SLAVE HOSTS: what dump/ registered, read only
    retention: Retention  # PURGE BINARY LOGS, by the rule automatic purges follow
    holds: ConsumerHolds  # SHOW CONSUMERS: the named consumers' holds (docs/retention.md)
    points: PointResolver  # AS OF points resolved to positions, off the loop, kept (points.py)
    # The read path over the cluster's GMS and DNs, for SELECTs over logical tables
    # (docs/snapshot-reads.md); None: a dumper serving files only (rows are refused).
    reads: TableReads | None = None
    # HA follower: its copy only changes by copying the leader (PURGE is refused).
    read_only: Callable[[], bool] = lambda: False


class Answers:
    """The answers of one subject to one session's statements (`executor.py` tables them)."""

    def __init__(self, ctx: SqlContext, state: SessionState) -> None:
        self.ctx = ctx
        self.state = state
