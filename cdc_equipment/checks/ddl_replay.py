"""The logical schema as of any point of a global binlog, by replaying its own DDL `Query` events.

This is the reference of `cdc verify-binlog`'s schema check. It reads only the DDL text that
consumers of the global binlog read (Debezium, canal and the like keep their schema by replaying
exactly these statements), with its own small parser: neither the GMS schema history nor the CN's
catalogue (both written by the code under test) is trusted. What it knows of a column is what a
TABLE_MAP can be checked against: its position, name, the binlog type codes its SQL type may be
written as, and for VARCHAR/VARBINARY its length in characters and the charset's bytes per
character. A statement it cannot follow for a table makes that table *unknown* (not checked, and
said so) until a later CREATE TABLE gives it a definition again: a false alarm would teach
operators to ignore the check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from cdc.binlog.constants import ColumnType as T

_BLOBS = frozenset({T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB, T.JSON})
# SQL type -> the binlog type codes a TABLE_MAP may carry for it (MariaDB and MySQL).
_TYPES: dict[str, frozenset[int]] = {
    **dict.fromkeys(("TINYINT", "BOOL", "BOOLEAN", "INT1"), frozenset({T.TINY})),
    **dict.fromkeys(("SMALLINT", "INT2"), frozenset({T.SHORT})),
    **dict.fromkeys(("MEDIUMINT", "INT3", "MIDDLEINT"), frozenset({T.INT24})),
    **dict.fromkeys(("INT", "INTEGER", "INT4"), frozenset({T.LONG})),
    **dict.fromkeys(("BIGINT", "INT8", "SERIAL"), frozenset({T.LONGLONG})),
    "FLOAT": frozenset({T.FLOAT, T.DOUBLE}),  # FLOAT(p) with p > 24 is a DOUBLE
    **dict.fromkeys(("DOUBLE", "REAL", "FLOAT8"), frozenset({T.DOUBLE})),
    **dict.fromkeys(("DECIMAL", "DEC", "NUMERIC", "FIXED"), frozenset({T.NEWDECIMAL, T.DECIMAL})),
    "DATE": frozenset({T.DATE, T.NEWDATE}),
    "TIME": frozenset({T.TIME, T.TIME2}),
    "DATETIME": frozenset({T.DATETIME, T.DATETIME2}),
    "TIMESTAMP": frozenset({T.TIMESTAMP, T.TIMESTAMP2}),
    "YEAR": frozenset({T.YEAR}),
    **dict.fromkeys(("CHAR", "CHARACTER", "NCHAR", "BINARY"), frozenset({T.STRING})),
    **dict.fromkeys(("VARCHAR", "NVARCHAR", "VARBINARY"), frozenset({T.VARCHAR, T.VAR_STRING})),
    **dict.fromkeys(
        (
            "TINYTEXT",
            "TEXT",
            "MEDIUMTEXT",
            "LONGTEXT",
            "TINYBLOB",
            "BLOB",
            "MEDIUMBLOB",
            "LONGBLOB",
            "JSON",
            "LONG",  # LONG / LONG VARCHAR: MEDIUMTEXT
        ),
        _BLOBS,
    ),
    "ENUM": frozenset({T.STRING, T.ENUM}),
    "SET": frozenset({T.STRING, T.SET}),
    "BIT": frozenset({T.BIT}),
}
# Bytes per character of the usual charsets (a VARCHAR's TABLE_MAP length is in bytes).
_MBMAX = {"latin1": 1, "ascii": 1, "binary": 1, "utf8": 3, "utf8mb3": 3, "utf8mb4": 4, "ucs2": 2}
_MBMAX |= {"utf16": 4, "utf32": 4, "gbk": 2, "gb2312": 2, "big5": 2, "sjis": 2, "cp1252": 1}
_BINARY_TYPES = frozenset({"BINARY", "VARBINARY"})
_KEY_WORDS = frozenset(
    {"PRIMARY", "KEY", "INDEX", "UNIQUE", "CONSTRAINT", "FOREIGN", "FULLTEXT", "SPATIAL", "CHECK"}
)
_KEY_WORDS |= {"PERIOD", "PARTITION", "SYSTEM"}
_TOKEN = re.compile(
    r"\s+|/\*.*?\*/|--[^\n]*|#[^\n]*"  # skipped
    r"|(`(?:[^`]|``)*`|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|\d+(?:\.\d+)?|[\w$]+|\S)",
    re.S,
)


@dataclass(frozen=True, slots=True)
class ExpectedColumn:
    name: str
    sql_type: str  # as declared, for messages: "VARCHAR(64) utf8mb4"
    codes: frozenset[int] | None  # binlog type codes it may be written as; None: not checked
    chars: int | None = None  # VARCHAR/VARBINARY length in characters
    mbmax: int | None = None  # bytes per character; None: unknown charset (any 1..4 accepted)

    def varchar_bytes(self) -> frozenset[int] | None:
        """The TABLE_MAP lengths (bytes) this VARCHAR may carry; None if not a VARCHAR."""
        if self.chars is None:
            return None
        if self.mbmax is not None:
            return frozenset({self.chars * self.mbmax})
        return frozenset(self.chars * k for k in (1, 2, 3, 4))


@dataclass(slots=True)
class TableSchema:
    columns: list[ExpectedColumn]
    since: str  # the DDL that gave it this shape, for messages
    mbmax: int | None = None  # the table's default charset


class Unsupported(ValueError):
    """A statement (or part of one) this parser does not follow."""


@dataclass(slots=True)
class LogicalSchema:
    """Tables by (db, table); a table in `unknown` has a definition this replay cannot know."""

    tables: dict[tuple[str, str], TableSchema] = field(default_factory=dict)
    unknown: dict[tuple[str, str], str] = field(default_factory=dict)  # -> why

    def columns(self, db: str, table: str) -> TableSchema | None:
        return self.tables.get((db, table))

    def apply(self, sql: str, default_db: str, where: str) -> None:
        """Replay one DDL statement; `where` names it in messages (TSO, position)."""
        toks = _tokens(sql)
        try:
            _Statement(self, toks, default_db, where).run()
        except (Unsupported, IndexError) as exc:
            # A statement this parser cannot follow: every table it names becomes unknown.
            for key in _tables_named(toks, default_db):
                self.tables.pop(key, None)
                self.unknown[key] = f"{where}: {str(exc) or 'unparsed'}: {sql[:80]!r}"


def _tokens(sql: str) -> list[str]:
    return [m.group(1) for m in _TOKEN.finditer(sql) if m.group(1)]


def _ident(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1].replace("``", "`")
    return tok


def _tables_named(toks: list[str], default_db: str) -> list[tuple[str, str]]:
    """Best effort: the `TABLE name` of a statement we could not parse."""
    for i, t in enumerate(toks[:-1]):
        if t.upper() == "TABLE":
            j = i + 1
            while j < len(toks) and toks[j].upper() in ("IF", "NOT", "EXISTS"):
                j += 1
            if j < len(toks):
                db, table, _ = _name_at(toks, j, default_db)
                return [(db, table)]
    return []


def _name_at(toks: list[str], i: int, default_db: str) -> tuple[str, str, int]:
    """`db.table` or `table` at toks[i]; returns (db, table, index after)."""
    first = _ident(toks[i])
    if i + 2 < len(toks) and toks[i + 1] == ".":
        return first, _ident(toks[i + 2]), i + 3
    return default_db, first, i + 1


class _Statement:
    def __init__(self, schema: LogicalSchema, toks: list[str], default_db: str, where: str):
        self.s, self.t, self.db, self.where, self.i = schema, toks, default_db, where, 0

    # -- token helpers
    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.t[j].upper() if j < len(self.t) else ""

    def take(self, *words: str) -> bool:
        if self.peek() in words:
            self.i += 1
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.take(word):
            raise Unsupported(f"expected {word} at {self.peek() or 'end'}")

    def name(self) -> tuple[str, str]:
        db, table, self.i = _name_at(self.t, self.i, self.db)
        return db, table

    def if_exists(self) -> bool:
        """Skips `IF [NOT] EXISTS`; True if it was there."""
        if self.take("IF"):
            self.take("NOT")
            self.expect("EXISTS")
            return True
        return False

    def group(self) -> list[str]:
        """The tokens of the parenthesized group at the cursor, without its parentheses."""
        self.expect("(")
        start, depth = self.i, 1
        while depth:
            tok = self.t[self.i]
            depth += (tok == "(") - (tok == ")")
            self.i += 1
        return self.t[start : self.i - 1]

    # -- statements
    def run(self) -> None:
        verb = self.peek()
        self.i += 1
        if verb == "CREATE":
            if self.take("OR"):
                self.expect("REPLACE")
            self.take("TEMPORARY")
            if self.take("TABLE"):
                return self.create_table()
            if self.take("DATABASE", "SCHEMA"):
                return None
            self.take("UNIQUE", "FULLTEXT", "SPATIAL")
            if self.take("INDEX"):
                return None
        elif verb == "DROP":
            self.take("TEMPORARY")
            if self.take("TABLE", "TABLES"):
                self.if_exists()
                while self.i < len(self.t):
                    self.forget(self.name())
                    if not self.take(","):
                        break
                return None
            if self.take("DATABASE", "SCHEMA"):
                self.if_exists()
                db = _ident(self.t[self.i])
                for key in [k for k in [*self.s.tables, *self.s.unknown] if k[0] == db]:
                    self.forget(key)
                return None
            if self.take("INDEX"):
                return None
        elif verb == "TRUNCATE":
            return None
        elif verb == "RENAME" and self.take("TABLE", "TABLES"):
            while self.i < len(self.t):
                old = self.name()
                self.expect("TO")
                self.rename(old, self.name())
                if not self.take(","):
                    break
            return None
        elif verb == "ALTER":
            self.take("ONLINE")
            self.take("IGNORE")
            if self.take("TABLE"):
                return self.alter_table()
            if self.take("DATABASE", "SCHEMA"):
                return None
        elif verb not in ("CREATE", "DROP", "ALTER", "RENAME"):
            return None  # not a schema change (SET, GRANT, …)
        raise Unsupported(f"{verb} {self.peek()}")

    def forget(self, key: tuple[str, str]) -> None:
        self.s.tables.pop(key, None)
        self.s.unknown.pop(key, None)

    def rename(self, old: tuple[str, str], new: tuple[str, str]) -> None:
        self.forget(new)
        if old in self.s.tables:
            self.s.tables[new] = self.s.tables.pop(old)
        elif old in self.s.unknown:
            self.s.unknown[new] = self.s.unknown.pop(old)

    def create_table(self) -> None:
        if_not_exists = self.if_exists()
        key = self.name()
        if if_not_exists and (key in self.s.tables or key in self.s.unknown):
            return  # CREATE TABLE IF NOT EXISTS of a table that exists: nothing happens
        if self.take("LIKE"):
            like = self.name()
            if like not in self.s.tables:
                raise Unsupported(f"LIKE {like[0]}.{like[1]}, whose definition is unknown")
            src = self.s.tables[like]
            self.s.tables[key] = replace(src, columns=list(src.columns), since=self.where)
            self.s.unknown.pop(key, None)
            return
        if self.peek() != "(":
            raise Unsupported("CREATE TABLE without a column list")
        body = self.group()
        mbmax = self.table_charset(self.t[self.i :])
        columns = [
            self.column(part, mbmax)
            for part in _split_commas(body)
            if part and part[0].upper() not in _KEY_WORDS
        ]
        self.s.tables[key] = TableSchema(columns, self.where, mbmax)
        self.s.unknown.pop(key, None)

    @staticmethod
    def table_charset(options: list[str]) -> int | None:
        up = [o.upper() for o in options]
        for i, tok in enumerate(up):
            if tok in ("CHARSET", "COLLATE") or (tok == "SET" and i and up[i - 1] == "CHARACTER"):
                j = i + 1 + (i + 1 < len(up) and up[i + 1] == "=")
                if j < len(options):
                    return _mbmax(options[j])
        return None

    def alter_table(self) -> None:
        key = self.name()
        table = self.s.tables.get(key)
        if table is None:
            return None  # not known before: stays unknown (or absent)
        cols = list(table.columns)
        new_key = key
        for spec in _split_commas(self.t[self.i :]):
            new_key = self.alter_spec(spec, cols, table, new_key)
        self.s.tables[key] = TableSchema(cols, self.where, table.mbmax)
        if new_key != key:
            self.rename(key, new_key)
        return None

    def alter_spec(
        self, spec: list[str], cols: list[ExpectedColumn], table: TableSchema, key: tuple[str, str]
    ) -> tuple[str, str]:
        sub = _Statement(self.s, spec, key[0], self.where)
        verb = sub.peek()
        sub.i += 1
        if verb == "ADD":
            if sub.peek() in _KEY_WORDS:
                return key
            sub.take("COLUMN")
            if_not_exists = sub.if_exists()
            if sub.peek() == "(":
                for part in _split_commas(sub.group()):
                    cols.append(sub.column(part, table.mbmax))
                return key
            col = sub.column(sub.t[sub.i :], table.mbmax)
            if not (if_not_exists and _at(cols, col.name.lower(), required=False) >= 0):
                _place(cols, col, sub.t[sub.i :], None)
        elif verb == "DROP":
            if sub.peek() in _KEY_WORDS:
                return key
            sub.take("COLUMN")
            if_exists = sub.take("IF")
            if if_exists:
                sub.expect("EXISTS")
            name = _ident(sub.t[sub.i]).lower()
            _at(cols, name, required=not if_exists)
            cols[:] = [c for c in cols if c.name.lower() != name]
        elif verb in ("MODIFY", "CHANGE"):
            sub.take("COLUMN")
            if sub.take("IF"):
                sub.expect("EXISTS")
            old = _ident(sub.t[sub.i]).lower()
            if verb == "CHANGE":
                sub.i += 1
            rest = sub.t[sub.i :]
            _place(cols, sub.column(rest, table.mbmax), rest, _at(cols, old, required=True))
        elif verb == "RENAME":
            if sub.take("COLUMN"):
                old = _ident(sub.t[sub.i]).lower()
                at = _at(cols, old, required=True)
                sub.i += 1
                sub.expect("TO")
                cols[at] = replace(cols[at], name=_ident(sub.t[sub.i]))
            elif sub.take("INDEX", "KEY"):
                pass
            else:
                sub.take("TO", "AS")
                return sub.name()
        elif verb == "CONVERT":
            # Every character column changes charset: lengths in bytes unknown from here on.
            cols[:] = [replace(c, mbmax=None) if c.chars and c.mbmax != 1 else c for c in cols]
        elif verb in ("ALTER", "ENGINE", "DEFAULT", "CHARSET", "CHARACTER", "COLLATE", "COMMENT"):
            pass  # a column default, an index's visibility, table options: no column change
        elif verb in ("ALGORITHM", "LOCK", "FORCE", "ROW_FORMAT", "AUTO_INCREMENT", "ORDER"):
            pass
        elif verb in ("PARTITION", "REMOVE", "COALESCE", "REORGANIZE", "ANALYZE", "REBUILD"):
            pass  # partitioning: rows move, columns do not
        elif verb in ("ENABLE", "DISABLE", "KEY_BLOCK_SIZE", "STATS_PERSISTENT", "CHECKSUM"):
            pass
        else:
            raise Unsupported(f"ALTER TABLE … {verb}")
        return key

    def column(self, part: list[str], table_mbmax: int | None) -> ExpectedColumn:
        if len(part) < 2:
            raise Unsupported("column definition without a type")
        name, sql_type = _ident(part[0]), part[1].upper()
        j = 2
        if sql_type == "NATIONAL" and len(part) > 2:
            sql_type, j = "N" + part[2].upper(), 3  # NATIONAL CHAR / VARCHAR: utf8
        if sql_type == "DOUBLE" and j < len(part) and part[j].upper() == "PRECISION":
            j += 1
        if sql_type == "CHARACTER" and j < len(part) and part[j].upper() == "VARYING":
            sql_type, j = "VARCHAR", j + 1
        args: list[str] = []
        if j < len(part) and part[j] == "(":
            depth, k = 0, j
            while True:
                depth += (part[k] == "(") - (part[k] == ")")
                k += 1
                if not depth:
                    break
            args, j = part[j + 1 : k - 1], k
        attrs = [p.upper() for p in part[j:]]
        explicit = None
        for k, a in enumerate(attrs[:-1]):
            if a in ("CHARSET", "COLLATE") or (a == "SET" and k and attrs[k - 1] == "CHARACTER"):
                explicit = _mbmax(part[j + k + 1])
                break
        if sql_type in _BINARY_TYPES:
            mbmax = 1
        elif sql_type in ("NCHAR", "NVARCHAR"):
            mbmax = 3
        else:
            mbmax = explicit if explicit is not None else table_mbmax
        codes = _TYPES.get(sql_type)
        if sql_type == "FLOAT" and len(args) == 1 and args[0].isdigit() and int(args[0]) > 24:
            codes = frozenset({T.DOUBLE})
        chars = None
        if sql_type in ("VARCHAR", "NVARCHAR", "VARBINARY") and args and args[0].isdigit():
            chars = int(args[0])
        shown = sql_type + (f"({''.join(args)})" if args and len(args) < 8 else "")
        if chars is not None and mbmax:
            shown += f" ({chars * mbmax} bytes)"
        return ExpectedColumn(name, shown, codes, chars, mbmax if chars else None)


def _mbmax(charset_or_collation: str) -> int | None:
    name = _ident(charset_or_collation).strip("'\"").lower()
    return _MBMAX.get(name, _MBMAX.get(name.split("_", 1)[0]))


def _split_commas(toks: list[str]) -> list[list[str]]:
    parts, depth, cur = [], 0, []
    for tok in toks:
        if tok == "," and depth == 0:
            parts.append(cur)
            cur = []
            continue
        depth += (tok == "(") - (tok == ")")
        cur.append(tok)
    parts.append(cur)
    return [p for p in parts if p]


def _at(cols: list[ExpectedColumn], name: str, required: bool) -> int:
    for i, c in enumerate(cols):
        if c.name.lower() == name:
            return i
    if required:
        raise Unsupported(f"no column {name} in the replayed definition")
    return -1


def _place(cols: list[ExpectedColumn], col: ExpectedColumn, rest: list[str], at: int | None):
    """Put `col` where FIRST / AFTER x says, else at `at` (MODIFY, CHANGE) or the end (ADD)."""
    up = [r.upper() for r in rest]
    if at is not None:
        del cols[at]
    if "FIRST" in up:
        cols.insert(0, col)
    elif "AFTER" in up:
        after = up.index("AFTER")
        cols.insert(_at(cols, _ident(rest[after + 1]).lower(), required=True) + 1, col)
    elif at is not None:
        cols.insert(at, col)
    else:
        cols.append(col)
