"""Parsing of SHOW and DESCRIBE: variables and status, binlog status, schema, grants,
replicas and sessions (the statements a client reads the server's state with)."""

from __future__ import annotations

from dumper.server.handlers import SqlError
from dumper.server.sql.cursor import Cursor
from dumper.server.sql.statements import (
    Condition,
    ShowAllBinaryLogs,
    ShowBinaryLogs,
    ShowBinaryStreams,
    ShowBinlogEvents,
    ShowColumns,
    ShowConsumers,
    ShowCreateDatabase,
    ShowCreateTable,
    ShowDatabases,
    ShowEmpty,
    ShowGrants,
    ShowIndex,
    ShowMasterStatus,
    ShowProcesslist,
    ShowReplicas,
    ShowTables,
    ShowTableStatus,
    ShowVariables,
    Statement,
)


class ShowParser(Cursor):
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
        if self.accept("ALL", "BINARY", "LOGS"):
            self.end()
            return ShowAllBinaryLogs()
        if self.accept("CONSUMERS"):
            self.end()
            return ShowConsumers()
        if self.accept("BINARY", "STREAMS"):
            self.end()
            return ShowBinaryStreams()
        if self.accept("BINLOG", "EVENTS"):
            return self._show_binlog_events()
        if self.accept("DATABASES") or self.accept("SCHEMAS"):
            like = self.string() if self.accept("LIKE") else None
            self.end()
            return ShowDatabases(like)
        if self.accept("TABLES"):
            return self._show_tables(full)
        if self.accept("CREATE", "DATABASE") or self.accept("CREATE", "SCHEMA"):
            if_not_exists = self.accept("IF", "NOT", "EXISTS")
            db = self.name()
            self.end()
            return ShowCreateDatabase(db, if_not_exists)
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
            offset, out.limit = self.limit()
            if offset is not None:
                out.offset = offset
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
