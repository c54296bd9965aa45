"""A session's query handler: each statement to the answer of its subject, by an explicit table
(variables, binlog status, schema, information_schema, sessions, rows of logical tables). Results are values; the
session encodes them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dumper.server.handlers import ColumnPacket, Result
from dumper.server.sessions import SessionState
from dumper.server.sql import statements as st
from dumper.server.sql.answer_binlog import BinlogAnswers
from dumper.server.sql.answer_holds import HoldAnswers
from dumper.server.sql.answer_info_schema import InfoSchemaAnswers
from dumper.server.sql.answer_schema import SchemaAnswers
from dumper.server.sql.answer_sessions import SessionAnswers
from dumper.server.sql.answer_streams import StreamAnswers
from dumper.server.sql.answer_tables import TableAnswers
from dumper.server.sql.answer_variables import VariableAnswers
from dumper.server.sql.answers import SqlContext
from dumper.server.sql.lexer import split_statements
from dumper.server.sql.parser import parse


class QueryExecutor:
    """Answers one session's statements (a `QueryHandler`) from what the SQL answers share."""

    def __init__(self, ctx: SqlContext, state: SessionState) -> None:
        self.ctx = ctx
        self.state = state
        variables = VariableAnswers(ctx, state)
        binlog = BinlogAnswers(ctx, state)
        schema = SchemaAnswers(ctx, state)
        sessions = SessionAnswers(ctx, state)
        holds = HoldAnswers(ctx, state)
        tables = self._tables = TableAnswers(ctx, state)
        # Every statement type the parser makes, and who answers it.
        self._answers: dict[type, Callable[[Any], Result]] = {
            st.Select: variables.select,
            st.SetVars: variables.set_vars,
            st.ShowVariables: variables.show_variables,
            st.ShowMasterStatus: binlog.show_master_status,
            st.ShowBinaryLogs: binlog.show_binary_logs,
            st.ShowBinlogEvents: binlog.show_binlog_events,
            st.ShowAllBinaryLogs: holds.show_all_binary_logs,
            st.ShowConsumers: holds.show_consumers,
            st.ShowBinaryStreams: StreamAnswers(ctx, state).show_binary_streams,
            st.Purge: binlog.purge,
            st.ShowDatabases: schema.show_databases,
            st.ShowTables: schema.show_tables,
            st.ShowCreateDatabase: schema.show_create_database,
            st.ShowCreateTable: schema.show_create_table,
            st.ShowColumns: schema.show_columns,
            st.ShowIndex: schema.show_index,
            st.ShowTableStatus: schema.show_table_status,
            st.InfoSchemaSelect: InfoSchemaAnswers(ctx, state).select,
            st.TableSelect: tables.select,
            st.Transaction: tables.transaction,
            st.ShowReplicas: sessions.show_replicas,
            st.ShowProcesslist: sessions.show_processlist,
            st.Kill: sessions.kill,
            st.ShowGrants: sessions.show_grants,
            st.ShowEmpty: sessions.show_empty,
            st.Use: sessions.use,
            st.AccountChange: sessions.account_change,
            st.Noop: sessions.noop,
        }

    # -- QueryHandler ----------------------------------------------------------------------------
    def split(self, text: str) -> list[str]:
        return split_statements(text)

    def check(self, statement: str) -> None:
        parse(statement)

    def execute(self, statement: str) -> Result:
        return self.answer(parse(statement))

    async def describe(self, statement: str) -> Sequence[ColumnPacket]:
        stmt = parse(statement)
        if isinstance(stmt, st.TableSelect):
            return await self._tables.describe(stmt)
        return []

    def answer(self, stmt: st.Statement) -> Result:
        return self._answers[type(stmt)](stmt)
