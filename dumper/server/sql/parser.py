"""The SQL parser: one statement's tokens to a typed statement (`statements.py`), by its first
keyword (`_FIRST_WORDS`); SHOW and DESCRIBE are `parse_show.py`'s."""

from __future__ import annotations

from dumper.server.handlers import SqlError
from dumper.server.sql.cursor import LiteralError
from dumper.server.sql.lexer import MAX_NAME_CHARS
from dumper.server.sql.parse_select import parse_table_select, reads_table, unsupported
from dumper.server.sql.parse_show import ShowParser
from dumper.server.sql.points import parse_as_of
from dumper.server.sql.statements import (
    AccountChange,
    Assignment,
    Condition,
    InfoSchemaSelect,
    Kill,
    Literal,
    Noop,
    Purge,
    Select,
    SelectItem,
    SetVars,
    ShowEmpty,
    Statement,
    Transaction,
    Use,
)


class _Parser(ShowParser):
    def parse(self) -> Statement:
        tok = self.peek()
        if tok is None:
            raise SqlError("Query was empty", 1065)
        parse_rest = _FIRST_WORDS.get(tok.word())
        if parse_rest is None:
            raise self.error()
        self.i += 1
        return parse_rest(self)

    def _stmt_select(self) -> Statement:
        if reads_table(self):
            return parse_table_select(self)
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
        if (db or "").lower() == "information_schema" and table.lower() in _ALWAYS_EMPTY:
            # mariadb-dump's tablespaces query (subqueries, GROUP BY): no rows, whatever it asks
            self.i = len(self.toks)
            return ShowEmpty([out for _src, out in columns])
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

    def _account_change(self) -> Statement:
        return AccountChange()

    def _user_statement(self) -> Statement:
        """ALTER/CREATE/DROP/RENAME USER (any other ALTER, CREATE, ... is a write)."""
        if self.accept("USER"):
            return AccountChange()
        return self._write()

    def _write(self) -> Statement:
        """INSERT, UPDATE, DDL, ...: refused naming the statement (the binlog server is read-only;
        the cluster is written through its CN)."""
        self.i -= 1
        tok = self.peek()
        near = self.stmt[tok.start : tok.start + 60] if tok else ""
        raise SqlError(
            f"{tok.word() if tok else ''} is a write, and the binlog server is read-only (it "
            "answers SELECT over logical tables, SHOW and replication; write through the CN; "
            f"see docs/dumper.md), near '{near}'"
        )

    def _stmt_start(self) -> Statement:
        self.expect("TRANSACTION")
        action, as_of = "begin", None
        while not self.at_end():
            if self.accept("WITH", "CONSISTENT", "SNAPSHOT"):
                action = "snapshot"
            elif self.accept("READ", "ONLY", "AS", "OF"):  # TiDB's: pinned at the point
                as_of = parse_as_of(self)
            elif self.accept("READ", "WRITE"):
                raise unsupported("a read-write transaction (the binlog server is read-only)", "")
            elif not (self.accept(",") or self.accept("READ", "ONLY")):
                raise self.error()
        return Transaction(action, as_of)

    def _stmt_begin(self) -> Statement:
        self.accept("WORK")
        self.end()
        return Transaction("begin")

    def _stmt_end(self) -> Statement:
        """COMMIT [WORK], ROLLBACK [WORK]; ROLLBACK TO [SAVEPOINT] x keeps the transaction."""
        self.accept("WORK")
        if self.accept("TO"):
            self.accept("SAVEPOINT")
            self.name()
            self.end()
            return Noop()
        self.accept("AND", "NO", "CHAIN")
        self.accept("NO", "RELEASE")
        self.end()
        return Transaction("end")

    def _stmt_flush(self) -> Statement:
        """FLUSH [LOCAL | NO_WRITE_TO_BINLOG] TABLE[S] [t, …] [WITH READ LOCK]: answered as a
        read-only server does (nothing to flush; a read lock holds nothing here)."""
        self.accept("LOCAL") or self.accept("NO_WRITE_TO_BINLOG")
        if not (self.accept("TABLES") or self.accept("TABLE")):
            raise self.error()
        while not self.at_end() and not self.accept("WITH", "READ", "LOCK"):
            if self.accept("FOR", "EXPORT"):
                raise unsupported("FLUSH TABLES … FOR EXPORT", "")
            self.qualified()
            self.accept(",")
        self.end()
        return Noop()

    def _stmt_lock(self) -> Statement:
        """LOCK TABLE[S] t [[AS] a] READ [LOCAL], …: WRITE is refused (read-only)."""
        if not (self.accept("TABLES") or self.accept("TABLE")):
            raise self.error()
        while True:
            self.qualified()
            if self.accept("AS") or (
                (tok := self.peek()) is not None
                and tok.kind in ("ident", "ident_q")
                and tok.word() not in ("READ", "WRITE", "LOW_PRIORITY")
            ):
                self.name()
            if self.accept("READ"):
                self.accept("LOCAL")
            else:
                raise unsupported("LOCK TABLES … WRITE (the binlog server is read-only)", "")
            if not self.accept(","):
                break
        self.end()
        return Noop()

    def _stmt_unlock(self) -> Statement:
        if not (self.accept("TABLES") or self.accept("TABLE")):
            raise self.error()
        self.end()
        return Noop()

    def _stmt_savepoint(self) -> Statement:
        self.name()
        self.end()
        return Noop()

    def _stmt_release(self) -> Statement:
        self.expect("SAVEPOINT")
        self.name()
        self.end()
        return Noop()


# information_schema tables a binlog server has no rows for (files, tablespaces, partitions
# of physical tables are the DNs').
_ALWAYS_EMPTY = ("files", "partitions", "triggers", "routines", "events", "views", "parameters")

# A statement's first keyword -> the parser of the rest of it.
_FIRST_WORDS = {
    "SELECT": _Parser._stmt_select,
    "SET": _Parser._stmt_set,
    "SHOW": _Parser._stmt_show,
    "DESC": _Parser._stmt_desc,
    "DESCRIBE": _Parser._stmt_desc,
    "PURGE": _Parser._stmt_purge,
    "KILL": _Parser._stmt_kill,
    "USE": _Parser._stmt_use,
    "GRANT": _Parser._account_change,
    "REVOKE": _Parser._account_change,
    "ALTER": _Parser._user_statement,
    "CREATE": _Parser._user_statement,
    "DROP": _Parser._user_statement,
    "RENAME": _Parser._user_statement,
    **dict.fromkeys(
        ("INSERT", "UPDATE", "DELETE", "REPLACE", "TRUNCATE", "LOAD", "CALL", "HANDLER"),
        _Parser._write,
    ),
    "BEGIN": _Parser._stmt_begin,
    "COMMIT": _Parser._stmt_end,
    "ROLLBACK": _Parser._stmt_end,
    "START": _Parser._stmt_start,
    "FLUSH": _Parser._stmt_flush,
    "LOCK": _Parser._stmt_lock,
    "UNLOCK": _Parser._stmt_unlock,
    "SAVEPOINT": _Parser._stmt_savepoint,
    "RELEASE": _Parser._stmt_release,
}


def parse(stmt: str) -> Statement:
    """Parse one statement (already split and comment-free); raises SqlError."""
    return _Parser(stmt).parse()
