"""A read as of a point P across DDL (docs/snapshot-reads.md, "Across DDL"): the table's shape at P
from the logical schema history (`topology.SchemaHistory`, a record per DDL with the table's
columns after it), and whether the DDL since P left everything the read needs.

The shards hold the rows in the shape now, the binlog's before-images in the shape of their
time; both are projected onto the columns the table had at P, by name. That is exact only while
every column of P kept its values: a DDL that dropped or renamed one of them, changed its type
(other than the widenings below), made it NOT NULL, changed its charset or collation, the
primary key (what rows and images are matched by), or that truncated or dropped the table, destroyed what the
read needs: it is refused naming that DDL. Adding a column, adding or dropping an index, a
default or a comment, or moving a column destroys nothing: the read is answered in the shape
at P. Nor does widening an integer (`INT` → `BIGINT`, the same signedness), a `VARCHAR` /
`VARBINARY` (n → m ≥ n) or a NOT NULL column to NULL: every value of P is spelled the same in
the wider type, and the DN's column packet of the wider type is turned back into the old one's
(`as_at_p`: another type code and display width, the length of n characters, the NOT NULL
flag), as a replica at P sends it."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field, replace

from cdc.binlog.events import cts_mark_text, parse_cts
from cdc.protocol.constants import ColumnType as T
from read_path.changes import EVENTS_PER_TURN, first_ddl
from read_path.first_images import Shape, TableChangedByDdl
from read_path.served import ServedFiles
from read_path.source import SnapshotSource
from read_path.values import ColumnDef

# What a column of P must keep in every later shape for its values (and their spelling, and
# the DN's column packet) to be the ones of P; its type may only widen (`_widened`).
_KEPT = ("charset", "collation")
NOT_NULL_FLAG = 0x0001  # a column packet's flag
# The integer types, narrowest first, and their packets' type codes.
_INTEGERS = {
    "tinyint": T.TINY,
    "smallint": T.SHORT,
    "mediumint": T.INT24,
    "int": T.LONG,
    "bigint": T.LONGLONG,
}
_RANKS = list(_INTEGERS)
_LENGTHS = ("varchar", "varbinary")
# `int(11) unsigned zerofill`, `varchar(16)`: the name, its width, the rest.
_TYPE = re.compile(r"^(\w+)(?:\((\d+)\))?(.*)$")


@dataclass(frozen=True, slots=True)
class PastShape:
    """The table at P: its columns (names, in order), each later DDL's shape of the rows the
    binlog holds after it (`Shape.picks`: where P's columns are in them), and the columns
    whose type is wider now than at P (lower-case name → (the type at P, the type now))."""

    names: list[str]
    later: list[Shape]
    widened: dict[str, tuple[str, str]] = field(default_factory=dict)
    not_null: set[str] = field(default_factory=set)  # NOT NULL at P (lower-case names)

    def as_at_p(self, col: ColumnDef, name: str | None, column: bool = True) -> ColumnDef:
        """The DN's packet of column `name` (`column`: the column's, else MIN/MAX's over it),
        as the column's definition at P describes it: its type, and NOT NULL if it was then
        (a MIN/MAX may be NULL whatever the column)."""
        if name is None:
            return col
        if column and name.lower() in self.not_null:
            col = replace(col, flags=col.flags | NOT_NULL_FLAG)
        types = self.widened.get(name.lower())
        if types is None:
            return col
        (old, old_width, _), (new, new_width, _) = (_parts(t) for t in types)
        if old in _INTEGERS:
            return replace(col, type=_INTEGERS[old], length=old_width or col.length)
        # The length of n characters: the packet counts the connection charset's bytes.
        return replace(col, length=col.length * (old_width or 0) // (new_width or 1))


def _parts(type_: str) -> tuple[str, int | None, str]:
    m = _TYPE.match(type_.strip().lower())
    assert m is not None, type_
    return m[1], None if m[2] is None else int(m[2]), m[3].strip()


def _widened(old: str, new: str) -> bool:
    """Whether every value of type `old` is one of `new`, spelled the same."""
    (a, a_width, a_rest), (b, b_width, b_rest) = _parts(old), _parts(new)
    if a_rest != b_rest:  # unsigned, zerofill
        return False
    if a in _INTEGERS and b in _INTEGERS:
        return _RANKS.index(b) >= _RANKS.index(a) and "zerofill" not in a_rest
    return a == b and a in _LENGTHS and (b_width or 0) >= (a_width or 0)


class Destroyed(Exception):
    """The `index`-th DDL on the table after P destroyed what a read as of P needs (`why`)."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index, self.why = index, why


def shape_at(at_p: dict | None, after: list[tuple[str, dict]]) -> PastShape:
    """The shape at P from its schema record's (`at_p`: None or {} when the table did not
    exist at P) and each later DDL's (its SQL, the table's schema after it), in order; a DDL
    that destroyed what the read needs raises `Destroyed`."""
    if not at_p or not at_p.get("columns"):
        raise Destroyed(0, "the table did not exist at that point")
    columns = at_p["columns"]
    names = [c["name"] for c in columns]
    key = {c["name"].lower() for c in columns if c.get("key") == "PRI"}
    later = []
    for n, (ddl, schema) in enumerate(after):
        if ddl.lstrip()[:8].upper().startswith("TRUNCATE"):
            raise Destroyed(n, "it emptied the table")
        now = schema.get("columns") or []
        if not now:
            raise Destroyed(n, "it dropped the table")
        by_name = {c["name"].lower(): (i, c) for i, c in enumerate(now)}
        if {c["name"].lower() for c in now if c.get("key") == "PRI"} != key:
            raise Destroyed(n, "it changed the primary key")
        picks = []
        for old in columns:
            found = by_name.get(old["name"].lower())
            if found is None:
                raise Destroyed(n, f"it dropped (or renamed) column {old['name']}")
            at, new = found
            if old["type"] != new["type"] and not _widened(old["type"], new["type"]):
                raise Destroyed(
                    n, f"it changed column {old['name']}'s type from {old['type']} to {new['type']}"
                )
            if new.get("nullable", True) < old.get("nullable", True):  # NULLs made values
                raise Destroyed(n, f"it made column {old['name']} NOT NULL")
            for what in _KEPT:
                if old.get(what) != new.get(what):
                    raise Destroyed(
                        n,
                        f"it changed column {old['name']}'s {what} from {old.get(what)} to "
                        f"{new.get(what)}",
                    )
            picks.append(at)
        identity = picks == list(range(len(now)))
        later.append(Shape(ddl, len(now), None if identity else picks))
    # The packets come from the DN: in the type now, the last DDL's.
    last = {c["name"].lower(): c["type"] for c in after[-1][1]["columns"]} if after else {}
    widened = {
        c["name"].lower(): (c["type"], last[c["name"].lower()])
        for c in columns
        if last and last[c["name"].lower()] != c["type"]
    }
    nulls = {c["name"].lower() for c in columns if not c.get("nullable", True)}
    return PastShape(names, later, widened, nulls)


async def past_shape(
    source: SnapshotSource, files: ServedFiles, position: tuple[str, int], db: str, table: str
) -> PastShape | None:
    """The shape of `db.table` at `position` if a DDL on it is after that point (None: none
    is, the shards' shape is P's); a DDL that destroyed what the read needs refused as
    `TableChangedByDdl`, named with its place in the files."""
    tso = await first_tso_after(files, position)
    if tso is None:
        return None  # nothing after P in the files: a DDL landing meanwhile is met by the scan
    at_p, after = await source.schema_history(db, table, tso - 1)
    if not after:
        return None
    try:
        return shape_at(at_p, [(r.ddl, r.schema) for r in after])
    except Destroyed as exc:
        record = after[exc.index]
        found = await first_ddl(files, position, db, table, skip=exc.index)
        where, text = found or (f"TSO {record.tso} (not in the served files yet)", record.ddl)
        raise TableChangedByDdl(db, table, where, text, exc.why) from None


async def first_tso_after(files: ServedFiles, position: tuple[str, int]) -> int | None:
    """The commit TSO of the first transaction at or after `position` (its CTS mark), None if
    there is none yet. Every transaction before the point has a smaller TSO, every DDL after
    it this one or a larger: the schema at P is the newest record below it."""
    names = files.names()
    if position[0] not in names:
        return None
    budget = EVENTS_PER_TURN
    for name in names[names.index(position[0]) :]:
        for ev in files.events(name, position[1] if name == position[0] else 4):
            budget -= 1
            if budget <= 0:  # a large transaction: the loop's other sessions run meanwhile
                await asyncio.sleep(0)
                budget = EVENTS_PER_TURN
            mark = cts_mark_text(ev.data)
            if mark is not None:
                return parse_cts(mark)
    return None
