"""A small SQL recognizer for the statements replication clients and the mariadb CLI send: comment
stripping, multi-statement splitting outside quotes, a tokenizer, and typed statement objects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# -- limits ---------------------------------------------------------------------------------------
# Every pattern that runs over client text is linear in time and memory: quoted bodies use
# possessive repeats (Python >= 3.11), which keep no backtracking state per character — the
# plain `(?:[^'\\]|\\.|'')*` form cost ~300 bytes of regex stack per byte of literal (issue 19).
# Splitting copies runs of text in slices, never per character.
MAX_TOKENS = 100_000  # per statement: every statement clients send has a few hundred at most
MAX_DIGITS = 65  # MySQL's DECIMAL precision: a longer number literal is refused, not converted
MAX_NAME_CHARS = 256  # a result column named after its expression is cut there, as MySQL does
UINT64_MAX = (1 << 64) - 1


class SqlError(Exception):
    """A statement we cannot parse or do not support; becomes an ERR packet (1064 by default)."""

    def __init__(self, message: str, code: int = 1064, sql_state: str = "42000") -> None:
        super().__init__(message)
        self.code = code
        self.sql_state = sql_state
        self.message = message


class LiteralError(SqlError):
    """A literal out of range: reported as is, never retried as another statement form."""


# -- splitting ------------------------------------------------------------------------------------
# Text copied as it is: anything but `;` and comments, with whole quoted runs (an
# unterminated one runs to the end: `'?`, and `\\.?` for a lone backslash at the very end). One
# possessive repeat skips a whole stretch in C however many quotes it holds (`a'a'a'…`).
_VERBATIM = re.compile(
    r"""(?:[^'"`;#/\-]++
    | '(?:[^'\\]++|\\.?|'')*+'?
    | "(?:[^"\\]++|\\.?|"")*+"?
    | `(?:[^`]++|``)*+`?
    | /(?!\*)
    | -(?!-(?:[ \t\r\n]|\Z))   # a minus sign; `-- ` (dash dash space) opens a comment
    )*+""",
    re.S | re.X,
)
_EXEC_COMMENT = re.compile(r"/\*M?!\d*")
_SEPARATORS = re.compile(r"[;\s]*+")  # empty statements between `;`s are dropped


def split_statements(sql: str) -> list[str]:
    """Strip comments (keeping the text of `/*! ... */` executable comments) and split on `;`
    outside quotes; empty statements are dropped."""
    out: list[str] = []
    cur: list[str] = []  # the statement so far, in pieces
    i, n = 0, len(sql)
    verbatim = _VERBATIM.match
    while True:
        j = verbatim(sql, i).end()  # always matches, maybe empty
        cur.append(sql[i:j])
        if j >= n:
            break
        if sql.startswith("/*", j):
            end = sql.find("*/", j + 2)
            end = n if end < 0 else end
            ex = _EXEC_COMMENT.match(sql, j, end)
            if ex:  # executable comment: its text is part of the statement
                cur.append(" " + sql[ex.end() : end] + " ")
            else:
                cur.append(" ")
            i = end + 2
        elif sql[j] in "#-":  # `# …` or `-- …`, to the end of the line
            end = sql.find("\n", j)
            i = n if end < 0 else end
        else:  # ";"
            if stmt := "".join(cur).strip():
                out.append(stmt)
            cur = []
            i = _SEPARATORS.match(sql, j).end()  # type: ignore[union-attr]  # `;;;…` at once
    if stmt := "".join(cur).strip():
        out.append(stmt)
    return out


# -- tokens ---------------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""
    (?P<ws>\s++)
  | (?P<sysvar>@@(?:(?i:global|session|local)\s*+\.\s*+)?`?[A-Za-z0-9_$]++`?)
  | (?P<uservar>@(?:'(?:[^'\\]++|\\.)*+'|"(?:[^"\\]++|\\.)*+"|`[^`]*+`|[A-Za-z0-9_$.]++))
  | (?P<str>'(?:[^'\\]++|\\.|'')*+'|"(?:[^"\\]++|\\.|"")*+")
  | (?P<num>\d++(?:\.\d++)?(?:[eE][-+]?\d++)?)
  | (?P<qident>`(?:[^`]++|``)*+`)
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*+)
  | (?P<op><=>|<>|!=|<=|>=|:=|[(),=.*<>+\-/%])
    """,
    re.X | re.S,
)
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_ESCAPE = re.compile(r"\\(.)", re.S)


def _unescape(m: re.Match[str]) -> str:
    ch = m.group(1)
    if ch in "%_":  # MySQL keeps the backslash before % and _ (LIKE escapes)
        return "\\" + ch
    return _ESCAPES.get(ch, ch)


def unquote_string(text: str) -> str:
    q, body = text[0], text[1:-1]
    if q + q in body:
        body = body.replace(q + q, q)
    if "\\" not in body:
        return body
    return _ESCAPE.sub(_unescape, body)


@dataclass(slots=True)
class Token:
    kind: str
    text: str
    value: str
    start: int
    end: int

    def word(self) -> str:
        return self.text.upper() if self.kind == "ident" else ""


def tokenize(stmt: str) -> list[Token]:
    tokens, pos = [], 0
    while pos < len(stmt):
        m = _TOKEN.match(stmt, pos)
        if not m:
            raise SqlError(f"You have an error in your SQL syntax near '{stmt[pos : pos + 40]}'")
        kind = m.lastgroup or ""
        text = m.group()
        pos = m.end()
        if kind == "ws":
            continue
        if len(tokens) >= MAX_TOKENS:
            raise SqlError(
                f"Statement too long for the binlog server: more than {MAX_TOKENS} tokens"
            )
        value = text
        if kind == "str":
            value = unquote_string(text)
        elif kind == "qident":
            kind, value = "ident_q", text[1:-1].replace("``", "`")
        elif kind == "uservar":
            name = text[1:]
            value = unquote_string(name) if name[0] in "'\"" else name.strip("`")
            value = value.lower()
        elif kind == "sysvar":
            value = re.sub(r"\s+|`", "", text[2:]).lower()
        tokens.append(Token(kind, text, value, m.start(), m.end()))
    return tokens


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
    op: str  # "=", "IN" or "LIKE"
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
    """Accepted and ignored (transaction control, session settings we do not model)."""


Statement = (
    Select
    | InfoSchemaSelect
    | SetVars
    | ShowVariables
    | ShowMasterStatus
    | ShowBinaryLogs
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
)


# -- parser ---------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, stmt: str) -> None:
        self.stmt = stmt
        self.toks = tokenize(stmt)
        self.i = 0

    # cursor helpers
    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at_end(self) -> bool:
        return self.i >= len(self.toks)

    def error(self) -> SqlError:
        tok = self.peek()
        near = self.stmt[tok.start : tok.start + 60] if tok else ""
        return SqlError(
            "You have an error in your SQL syntax, or this statement is not supported by the "
            f"binlog server (see docs/dumper.md), near '{near}'"
        )

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error()
        self.i += 1
        return tok

    def accept(self, *words: str) -> bool:
        """Consume the keyword sequence `words` if it comes next."""
        for k, w in enumerate(words):
            tok = self.peek(k)
            if tok is None or (tok.word() != w and not (tok.kind == "op" and tok.text == w)):
                return False
        self.i += len(words)
        return True

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error()

    def end(self) -> None:
        if not self.at_end():
            raise self.error()

    def name(self) -> str:
        tok = self.next()
        if tok.kind not in ("ident", "ident_q"):
            self.i -= 1
            raise self.error()
        return tok.value

    def string(self) -> str:
        tok = self.next()
        if tok.kind != "str":
            self.i -= 1
            raise self.error()
        return tok.value

    def string_or_name(self) -> str:
        tok = self.peek()
        return self.string() if tok is not None and tok.kind == "str" else self.name()

    def integer(self) -> int:
        """An unsigned integer literal up to 2^64 - 1 (LIMIT, FROM, KILL): MySQL's grammar has
        no larger integer there, so a larger one is a syntax error, as in MySQL."""
        tok = self.next()
        if tok.kind != "num" or not tok.text.isdigit():
            self.i -= 1
            raise self.error()
        text = tok.text.lstrip("0") or "0"
        if len(text) > 20 or int(text) > UINT64_MAX:
            self.i -= 1
            raise self.error()
        return int(text)

    def qualified(self) -> tuple[str | None, str]:
        first = self.name()
        if self.accept("."):
            return first, self.name()
        return None, first

    # expressions
    def expr(self) -> Expr:
        tok = self.next()
        if tok.kind == "str":
            value: str = tok.value
            while (nxt := self.peek()) is not None and nxt.kind == "str":  # 'a' 'b' concatenates
                value += self.next().value
            return Literal(value)
        if tok.kind == "num":
            return Literal(_number(tok.text))
        if tok.kind == "op" and tok.text == "-":
            inner = self.expr()
            if isinstance(inner, Literal) and isinstance(inner.value, int | float):
                return Literal(-inner.value)
            raise self.error()
        if tok.kind == "op" and tok.text == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if tok.kind == "sysvar":
            scope, _, name = tok.value.rpartition(".")
            return SysVar("session" if scope == "local" else scope, name)
        if tok.kind == "uservar":
            return UserVar(tok.value)
        if tok.kind == "ident":
            word = tok.word()
            if word == "NULL":
                return Literal(None)
            if word in ("TRUE", "FALSE"):
                return Literal(1 if word == "TRUE" else 0)
            if self.accept("("):
                args: list[Expr] = []
                if not self.accept(")"):
                    args.append(self.expr())
                    while self.accept(","):
                        args.append(self.expr())
                    self.expect(")")
                return Func(word, tuple(args))
            if word in ("CURRENT_USER", "CURRENT_TIMESTAMP", "LOCALTIME", "LOCALTIMESTAMP"):
                return Func(word)
            if word in ("ON", "OFF"):  # SET autocommit = ON
                return Literal(word)
        self.i -= 1
        raise self.error()

    # statements
    def parse(self) -> Statement:
        tok = self.peek()
        if tok is None:
            raise SqlError("Query was empty", 1065)
        word = tok.word()
        handler = getattr(self, f"_stmt_{word.lower()}", None) if word else None
        if handler is None:
            raise self.error()
        self.i += 1
        return handler()

    def _stmt_select(self) -> Statement:
        items: list[SelectItem] = []
        start_i = self.i
        while True:
            tok = self.peek()
            if tok is None:
                raise self.error()
            if tok.kind == "op" and tok.text == "*":
                self.i = start_i
                return self._info_schema_select()
            try:
                expr = self.expr()
            except LiteralError:
                raise
            except SqlError:
                self.i = start_i
                return self._info_schema_select()
            end = self.toks[self.i - 1].end
            name = self.stmt[tok.start : min(end, tok.start + MAX_NAME_CHARS)]
            if self.accept("AS"):
                name = self.string_or_name()
            elif (nxt := self.peek()) is not None and (
                nxt.kind in ("ident_q", "str")
                or (nxt.kind == "ident" and nxt.word() not in ("FROM", "LIMIT", "WHERE"))
            ):
                name = self.string_or_name()
            items.append(SelectItem(expr, name))
            if not self.accept(","):
                break
        if self.accept("FROM"):
            if not self.accept("DUAL"):
                self.i = start_i
                return self._info_schema_select()
        if self.accept("LIMIT"):
            self.integer()
        self.end()
        return Select(items)

    def _info_schema_select(self) -> Statement:
        columns: list[tuple[str, str]] = []
        while True:
            if self.accept("*"):
                columns.append(("*", "*"))
            else:
                col = self.name()
                if self.accept("."):
                    col = self.name()
                out = col
                if self.accept("AS") or (
                    (nxt := self.peek()) is not None
                    and nxt.kind in ("ident", "ident_q")
                    and nxt.word() != "FROM"
                ):
                    out = self.string_or_name()
                columns.append((col.lower(), out))
            if not self.accept(","):
                break
        self.expect("FROM")
        db, table = self.qualified()
        if (db or "").lower() != "information_schema":
            raise SqlError(
                f"Table '{db or '?'}.{table}' is not served by the binlog server "
                "(only information_schema COLUMNS, TABLES, SCHEMATA, STATISTICS and "
                "KEY_COLUMN_USAGE are)",
                1146,
                "42S02",
            )
        if (
            (nxt := self.peek()) is not None
            and nxt.kind in ("ident", "ident_q")
            and nxt.word()
            not in (
                "WHERE",
                "ORDER",
                "LIMIT",
            )
        ):
            self.name()  # table alias
        where: list[Condition] = []
        if self.accept("WHERE"):
            where.append(self._condition())
            while self.accept("AND"):
                where.append(self._condition())
        if self.accept("ORDER", "BY"):
            self.name()
            while self.accept(","):
                self.name()
            self.accept("ASC") or self.accept("DESC")
        limit = None
        if self.accept("LIMIT"):
            limit = self.integer()
        self.end()
        return InfoSchemaSelect(table.lower(), columns, where, limit)

    def _condition(self) -> Condition:
        col = self.name()
        if self.accept("."):
            col = self.name()
        col = col.lower()
        if self.accept("="):
            return Condition(col, "=", [self._literal_text()])
        if self.accept("LIKE"):
            return Condition(col, "LIKE", [self.string()])
        if self.accept("IN"):
            self.expect("(")
            values = [self._literal_text()]
            while self.accept(","):
                values.append(self._literal_text())
            self.expect(")")
            return Condition(col, "IN", values)
        raise self.error()

    def _literal_text(self) -> str:
        expr = self.expr()
        if not isinstance(expr, Literal) or expr.value is None:
            raise self.error()
        return str(expr.value)

    def _stmt_set(self) -> Statement:
        if self.accept("PASSWORD"):
            return AccountChange()
        if self.accept("NAMES") or self.accept("CHARACTER", "SET") or self.accept("CHARSET"):
            self.next()
            if self.accept("COLLATE"):
                self.next()
            self.end()
            return Noop()
        if self.accept("TRANSACTION") or self.accept("SESSION", "TRANSACTION"):
            return Noop()  # isolation levels mean nothing here
        assignments = [self._assignment("session")]
        while self.accept(","):
            assignments.append(self._assignment(assignments[-1].kind))
        self.end()
        return SetVars(assignments)

    def _assignment(self, default_kind: str) -> Assignment:
        tok = self.next()
        if tok.kind == "uservar":
            kind, name = "user", tok.value
        elif tok.kind == "sysvar":
            scope, _, name = tok.value.rpartition(".")
            kind = "global" if scope == "global" else "session"
        else:
            self.i -= 1
            kind = "session" if default_kind == "user" else default_kind
            if self.accept("GLOBAL"):
                kind = "global"
            elif self.accept("SESSION") or self.accept("LOCAL"):
                kind = "session"
            name = self.name().lower()
        if not (self.accept("=") or self.accept(":=")):
            raise self.error()
        tok = self.peek()
        if tok is not None and tok.kind == "ident" and tok.word() == "DEFAULT":
            self.i += 1
            return Assignment(kind, name, Literal(None))
        if kind != "user" and tok is not None and tok.kind in ("ident", "ident_q"):
            nxt = self.peek(1)
            if nxt is None or (nxt.kind == "op" and nxt.text == ","):
                self.i += 1  # SET sql_mode = TRADITIONAL, SET x = ON: bare words are values
                return Assignment(kind, name, Literal(tok.value))
        return Assignment(kind, name, self.expr())

    def _stmt_show(self) -> Statement:
        full = self.accept("FULL")
        scope = ""
        if self.accept("GLOBAL"):
            scope = "global"
        elif self.accept("SESSION") or self.accept("LOCAL"):
            scope = "session"
        if self.accept("VARIABLES"):
            return self._show_variables(scope, status=False)
        if self.accept("STATUS"):
            return self._show_variables(scope, status=True)
        if (
            self.accept("MASTER", "STATUS")
            or self.accept("BINARY", "LOG", "STATUS")
            or self.accept("BINLOG", "STATUS")
        ):
            self.end()
            return ShowMasterStatus()
        if self.accept("BINARY", "LOGS") or self.accept("MASTER", "LOGS"):
            self.end()
            return ShowBinaryLogs()
        if self.accept("BINLOG", "EVENTS"):
            return self._show_binlog_events()
        if self.accept("DATABASES") or self.accept("SCHEMAS"):
            like = self.string() if self.accept("LIKE") else None
            self.end()
            return ShowDatabases(like)
        if self.accept("TABLES"):
            return self._show_tables(full)
        if self.accept("CREATE", "TABLE"):
            db, table = self.qualified()
            self.end()
            return ShowCreateTable(db, table)
        if self.accept("COLUMNS") or self.accept("FIELDS"):
            return self._show_columns(full)
        if self.accept("INDEX") or self.accept("INDEXES") or self.accept("KEYS"):
            db, table = self._from_table()
            return ShowIndex(db, table)
        if self.accept("TABLE", "STATUS"):
            out = ShowTableStatus()
            if self.accept("FROM") or self.accept("IN"):
                out.db = self.name()
            if self.accept("LIKE"):
                out.like = self.string()
            self.end()
            return out
        if self.accept("GRANTS"):
            user = None
            if self.accept("FOR"):
                if self.accept("CURRENT_USER"):
                    self.accept("(") and self.expect(")")
                else:
                    user = self.string_or_name()
                    if (nxt := self.peek()) is not None and nxt.kind == "uservar":
                        self.i += 1  # 'u'@'host'
            self.end()
            return ShowGrants(user)
        if self.accept("SLAVE", "HOSTS"):
            self.end()
            return ShowReplicas(new_names=False)
        if self.accept("REPLICAS"):
            self.end()
            return ShowReplicas(new_names=True)
        if self.accept("WARNINGS") or self.accept("ERRORS"):
            return ShowEmpty(["Level", "Code", "Message"])
        if (
            self.accept("SLAVE", "STATUS")
            or self.accept("REPLICA", "STATUS")
            or self.accept("ALL", "SLAVES", "STATUS")
        ):
            return ShowEmpty(["Slave_IO_State", "Master_Host", "Master_User", "Master_Port"])
        if self.accept("PROCESSLIST"):
            self.end()
            return ShowProcesslist()
        if self.accept("ENGINES"):
            return ShowEmpty(["Engine", "Support", "Comment", "Transactions", "XA", "Savepoints"])
        raise self.error()

    def _show_variables(self, scope: str, status: bool) -> Statement:
        conditions: list[Condition] = []
        if self.accept("LIKE"):
            conditions.append(Condition("variable_name", "LIKE", [self.string()]))
        elif self.accept("WHERE"):
            conditions.append(self._condition())
            while self.accept("OR"):
                conditions.append(self._condition())
            if any(c.column != "variable_name" for c in conditions):
                raise SqlError("Only `WHERE Variable_name ...` conditions are supported here")
        self.end()
        return ShowVariables(status, scope, conditions)

    def _show_binlog_events(self) -> Statement:
        out = ShowBinlogEvents()
        if self.accept("IN"):
            out.file = self.string()
        if self.accept("FROM"):
            out.pos = self.integer()
        if self.accept("LIMIT"):
            first = self.integer()
            if self.accept(","):
                out.offset, out.limit = first, self.integer()
            else:
                out.limit = first
        self.end()
        return out

    def _show_tables(self, full: bool) -> Statement:
        out = ShowTables(full)
        if self.accept("FROM") or self.accept("IN"):
            out.db = self.name()
        if self.accept("LIKE"):
            out.like = self.string()
        elif self.accept("WHERE"):
            cond = self._condition()
            if cond.column != "table_type" or cond.op != "=":
                raise SqlError("Only `WHERE Table_type = '...'` is supported in SHOW TABLES")
            out.table_type = cond.values[0]
        self.end()
        return out

    def _show_columns(self, full: bool) -> Statement:
        db, table = self._from_table()
        return ShowColumns(full, db, table)

    def _from_table(self) -> tuple[str | None, str]:
        """`{FROM | IN} [db.]table [{FROM | IN} db]` to the end of the statement."""
        if not (self.accept("FROM") or self.accept("IN")):
            raise self.error()
        db, table = self.qualified()
        if self.accept("FROM") or self.accept("IN"):
            db = self.name()
        self.end()
        return db, table

    def _stmt_desc(self) -> Statement:
        db, table = self.qualified()
        self.end()
        return ShowColumns(False, db, table)

    _stmt_describe = _stmt_desc

    def _stmt_purge(self) -> Statement:
        if not (self.accept("BINARY", "LOGS") or self.accept("MASTER", "LOGS")):
            raise self.error()
        if self.accept("TO"):
            out = Purge(to=self.string())
        elif self.accept("BEFORE"):
            out = Purge(before=self.string())
        else:
            raise self.error()
        self.end()
        return out

    def _stmt_kill(self) -> Statement:
        query_only = self.accept("QUERY")
        self.accept("CONNECTION")
        out = Kill(self.integer(), query_only)
        self.end()
        return out

    def _stmt_use(self) -> Statement:
        db = self.name()
        self.end()
        return Use(db)

    def _noop(self) -> Statement:
        return Noop()

    def _account_change(self) -> Statement:
        return AccountChange()

    _stmt_grant = _stmt_revoke = _account_change

    def _stmt_alter(self) -> Statement:
        return self._user_statement()

    _stmt_create = _stmt_drop = _stmt_rename = _stmt_alter

    def _user_statement(self) -> Statement:
        if self.accept("USER"):
            return AccountChange()
        raise self.error()

    _stmt_begin = _stmt_commit = _stmt_rollback = _noop

    def _stmt_start(self) -> Statement:
        self.expect("TRANSACTION")
        return Noop()


def _number(text: str) -> int | float:
    """A number literal's value, or SqlError 1064 — never Python's own errors (int() refuses
    more than 4300 digits with ValueError; float() overflows to inf)."""
    if text.isdigit():
        if len(text.lstrip("0")) > MAX_DIGITS:
            raise LiteralError(
                f"Number literal '{text[:20]}...' too long: the binlog server accepts at most "
                f"{MAX_DIGITS} digits (MySQL's DECIMAL precision)"
            )
        return int(text)
    value = float(text) if len(text) <= 2 * MAX_DIGITS else float("inf")
    if value == float("inf"):
        raise LiteralError(
            f"Illegal double '{text[:40]}' value found during parsing", 1367, "22007"
        )
    return value


def parse(stmt: str) -> Statement:
    """Parse one statement (already split and comment-free); raises SqlError."""
    return _Parser(stmt).parse()
