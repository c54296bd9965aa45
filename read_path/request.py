"""What the read path is asked: one SELECT over a logical table (docs/snapshot-reads.md, "SQL
surface"), as the server's parser makes it (dumper/server/sql/parse_select.py), and the refusal
of what it does not read. Its own types, so that the read path needs nothing of the server."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from cdc.protocol.sql_error import SqlError

ER_NOT_SUPPORTED_YET = 1235


def unsupported(construct: str, where: str = " in a SELECT over a logical table") -> SqlError:
    """MySQL's ER_NOT_SUPPORTED_YET, naming what the statement used."""
    return SqlError(
        f"This version of the binlog server doesn't yet support '{construct}{where}' (see "
        "docs/snapshot-reads.md)",
        ER_NOT_SUPPORTED_YET,
        "42000",
    )


# A WHERE literal: int, Decimal (exact, for numbers with a point), float (with an exponent), str
# or None. Written back as SQL for the DN by where.py.
WhereValue = int | Decimal | float | str | None


@dataclass(slots=True, frozen=True)
class Compare:
    column: str  # lower case
    op: str  # = <> < <= > >= (`!=` is read as <>; `value op column` is turned around)
    value: WhereValue


@dataclass(slots=True, frozen=True)
class Between:
    column: str
    low: WhereValue
    high: WhereValue
    negated: bool = False


@dataclass(slots=True, frozen=True)
class InList:
    column: str
    values: tuple[WhereValue, ...]
    negated: bool = False


@dataclass(slots=True, frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(slots=True, frozen=True)
class BoolOp:
    op: str  # AND or OR
    parts: tuple[Where, ...]


@dataclass(slots=True, frozen=True)
class Not:
    part: Where


Where = Compare | Between | InList | IsNull | BoolOp | Not


@dataclass(slots=True, frozen=True)
class TableItem:
    kind: str  # "*", "column", "COUNT", "MIN" or "MAX" (COUNT is COUNT(*))
    column: str | None  # lower case; None for * and COUNT(*)
    name: str  # the result column's name: its alias, or the item as written


@dataclass(slots=True)
class TableSelect:
    db: str | None  # None: the session's database
    table: str
    alias: str | None
    items: list[TableItem]
    where: Where | None = None
    order_by: list[tuple[str, bool]] = field(default_factory=list)  # (column, descending)
    limit: int | None = None
    offset: int = 0
    # Flink CDC's split query (a derived table): the items fold the first `first` rows of this
    # SELECT in its order, after `offset` (sql/parse_select.py `_derived`); None: every row.
    first: int | None = None
    # `AS OF <point>` (docs/snapshot-reads.md, "As of a past point"): the point as written
    # (`history.PointSpec`), which the server resolves to the position the read starts from.
    as_of: object | None = None

    @property
    def aggregate(self) -> bool:
        return any(i.kind in ("COUNT", "MIN", "MAX") for i in self.items)
