"""The typed statements the parser makes and the executor answers: expressions, then one
dataclass per statement form (`Statement` is their union)."""

from __future__ import annotations

from dataclasses import dataclass, field

# -- SELECT over a logical table: the read path's request (read_path/request.py), re-exported
# here with the other statements the parser makes.
from read_path.request import (  # noqa: F401  (re-exported)
    Between,
    BoolOp,
    Compare,
    InList,
    IsNull,
    Not,
    TableItem,
    TableSelect,
    Where,
    WhereValue,
)


# -- expressions ----------------------------------------------------------------------------------
@dataclass(slots=True, frozen=True)
class Literal:
    value: str | int | float | None


@dataclass(slots=True, frozen=True)
class SysVar:
    scope: str  # "global", "session" or "" (session first, then global)
    name: str


@dataclass(slots=True, frozen=True)
class UserVar:
    name: str


@dataclass(slots=True, frozen=True)
class Func:
    name: str  # upper case
    args: tuple[Expr, ...] = ()


Expr = Literal | SysVar | UserVar | Func


# -- statements -----------------------------------------------------------------------------------
@dataclass(slots=True)
class SelectItem:
    expr: Expr
    name: str  # alias or the expression as written


@dataclass(slots=True)
class Select:
    items: list[SelectItem]


@dataclass(slots=True)
class Condition:
    column: str  # lower case
    op: str  # "=", "IN", "LIKE" or "=DATABASE()" (the session's database; no values)
    values: list[str]


@dataclass(slots=True)
class InfoSchemaSelect:
    table: str  # lower case: columns, tables, schemata
    columns: list[tuple[str, str]]  # (source column lower case, output name); ("*", "*")
    where: list[Condition] = field(default_factory=list)
    limit: int | None = None


@dataclass(slots=True)
class Assignment:
    kind: str  # "user", "session" or "global"
    name: str  # lower case
    expr: Expr


@dataclass(slots=True)
class SetVars:
    assignments: list[Assignment]


@dataclass(slots=True)
class ShowVariables:
    status: bool  # SHOW STATUS rather than VARIABLES
    scope: str
    conditions: list[Condition]  # OR-ed; empty: all


@dataclass(slots=True)
class ShowMasterStatus:
    pass


@dataclass(slots=True)
class ShowBinaryLogs:
    pass


@dataclass(slots=True)
class ShowAllBinaryLogs:
    """SHOW BINARY LOGS with the archived files too (docs/retention.md, "Archive")."""


@dataclass(slots=True)
class ShowConsumers:
    """The named consumers' holds (docs/retention.md)."""


@dataclass(slots=True)
class ShowBinaryStreams:
    """The streams of a multi-stream binlog (PolarDB-X's `SHOW BINARY STREAMS`)."""


@dataclass(slots=True)
class ShowBinlogEvents:
    file: str | None = None
    pos: int | None = None
    offset: int = 0
    limit: int | None = None


@dataclass(slots=True)
class ShowDatabases:
    like: str | None = None


@dataclass(slots=True)
class ShowTables:
    full: bool = False
    db: str | None = None
    like: str | None = None
    table_type: str | None = None


@dataclass(slots=True)
class ShowCreateTable:
    db: str | None
    table: str


@dataclass(slots=True)
class ShowColumns:
    full: bool
    db: str | None
    table: str


@dataclass(slots=True)
class ShowIndex:
    db: str | None
    table: str


@dataclass(slots=True)
class ShowTableStatus:
    db: str | None = None
    like: str | None = None


@dataclass(slots=True)
class ShowGrants:
    user: str | None = None


@dataclass(slots=True)
class ShowReplicas:
    new_names: bool  # SHOW REPLICAS (Source_Id, Replica_UUID) vs SHOW SLAVE HOSTS


@dataclass(slots=True)
class ShowEmpty:
    """Statements answered with an empty result of these columns (SHOW WARNINGS, ...)."""

    columns: list[str]


@dataclass(slots=True)
class ShowProcesslist:
    pass


@dataclass(slots=True)
class Purge:
    to: str | None = None
    before: str | None = None


@dataclass(slots=True)
class Kill:
    connection_id: int
    query_only: bool = False


@dataclass(slots=True)
class Use:
    db: str


@dataclass(slots=True)
class AccountChange:
    """SET PASSWORD, ALTER/CREATE/DROP/RENAME USER, GRANT, REVOKE: always refused (1290)."""


@dataclass(slots=True)
class Noop:
    """Accepted and ignored (session settings we do not model; FLUSH TABLES, LOCK TABLES … READ,
    UNLOCK TABLES and savepoints: nothing can change under a snapshot, so a read lock costs
    nothing and holds nothing)."""


@dataclass(slots=True)
class Transaction:
    """BEGIN / START TRANSACTION [WITH CONSISTENT SNAPSHOT] / COMMIT / ROLLBACK: where the
    session's reads are pinned (docs/snapshot-reads.md, "Transactions")."""

    action: str  # "begin", "snapshot" (pins at once), "end"
    as_of: object | None = None  # READ ONLY AS OF <point>: a history.PointSpec, pinned at once


@dataclass(slots=True)
class ShowCreateDatabase:
    db: str
    if_not_exists: bool = False


Statement = (
    Select
    | InfoSchemaSelect
    | TableSelect
    | SetVars
    | ShowVariables
    | ShowMasterStatus
    | ShowBinaryLogs
    | ShowAllBinaryLogs
    | ShowConsumers
    | ShowBinaryStreams
    | ShowBinlogEvents
    | ShowDatabases
    | ShowTables
    | ShowCreateTable
    | ShowColumns
    | ShowIndex
    | ShowTableStatus
    | ShowGrants
    | ShowReplicas
    | ShowEmpty
    | ShowProcesslist
    | Purge
    | Kill
    | Use
    | AccountChange
    | Noop
    | Transaction
    | ShowCreateDatabase
)
