"""Answers to parsed statements: variables, SHOW commands over the served binlog, schema queries
from the SchemaProvider, PURGE and KILL. Results are values; the session encodes them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from cdc.binlog.constants import EventType
from cdc.protocol.constants import ColumnType
from cdc.protocol.resultset import UNSIGNED_FLAG, Column
from dumper.server import retention, sql
from dumper.server.binlog_files import START, BinlogFileError, fde_checksum_alg, parse_purge_date
from dumper.server.context import ServerContext, SessionState
from dumper.server.event_info import event_info, event_type_name
from dumper.server.schema import TableSchema
from dumper.server.users import grants, has_any
from dumper.server.variables import LIVE_VARIABLES, VarValue, filter_names, like_to_regex

ER_ACCESS_DENIED = 1227
LONGLONG_U = {"type": ColumnType.LONGLONG, "flags": UNSIGNED_FLAG}


@dataclass(slots=True)
class OkResult:
    affected: int = 0


@dataclass(slots=True)
class RowsResult:
    columns: list[Column]
    # A list, or an iterator read while sending: it may raise sql.SqlError part way through
    # and yield None for work that makes no row (the session skips it, counting it as work).
    rows: Iterable[Sequence[object] | None] = field(default_factory=list)


Result = OkResult | RowsResult


# information_schema columns sent as integers.
_NUMERIC_INFO = frozenset(
    ("ordinal_position", "non_unique", "seq_in_index", "cardinality", "sub_part")
)


def _cols(*names: str) -> list[Column]:
    return [Column(n) for n in names]


def _value_column(name: str, value: object) -> Column:
    if isinstance(value, bool | int):
        return Column(name, ColumnType.LONGLONG)
    if isinstance(value, float):
        return Column(name, ColumnType.DOUBLE, decimals=31)
    return Column(name)


def denied(*privileges: str) -> sql.SqlError:
    return sql.SqlError(
        "Access denied; you need (at least one of) the "
        f"{', '.join(privileges)} privilege(s) for this operation",
        ER_ACCESS_DENIED,
        "42000",
    )


# Session variables clients SET besides the server variables we report (variables.py): what
# Connector/J, PyMySQL, Canal, Debezium, go-mysql and the mariadb CLI send, and settings of the
# mysql/mariadb clients' --init-command habits. Anything else is ERR 1193 as in MySQL; user
# variables (`@x`, every replica's @master_heartbeat_period, @slave_uuid, ...) are always fine.
SETTABLE_SESSION_VARIABLES = frozenset(
    (
        "sql_mode time_zone names sql_safe_updates sql_select_limit max_execution_time "
        "max_statement_time foreign_key_checks unique_checks sql_log_bin sql_quote_show_create "
        "group_concat_max_len lc_time_names lc_messages sql_big_selects big_tables sql_notes "
        "sql_warnings optimizer_switch profiling timestamp insert_id last_insert_id "
        "pseudo_thread_id default_week_format div_precision_increment long_query_time "
        "skip_replication gtid_seq_no net_retry_count sql_buffer_result max_join_size "
        "sql_max_join_size innodb_lock_wait_timeout lock_wait_timeout completion_type "
        "session_track_schema session_track_state_change session_track_system_variables "
        "session_track_transaction_info session_track_gtids collation_connection "
        "character_set_client character_set_connection character_set_results "
        "character_set_database collation_database transaction_isolation tx_isolation "
        "transaction_read_only tx_read_only autocommit wait_timeout interactive_timeout "
        "net_read_timeout net_write_timeout net_buffer_length sql_auto_is_null "
        "auto_increment_increment auto_increment_offset sql_require_primary_key "
        "explicit_defaults_for_timestamp default_storage_engine default_tmp_storage_engine "
        "binlog_format binlog_row_image gtid_domain_id slave_net_timeout "
        "rpl_semi_sync_slave_enabled sql_slave_skip_counter"
    ).split()
)
# Variables MySQL lets nobody set per session: ER_VARIABLE_IS_READONLY (1621) for
# max_allowed_packet (it is enforced per connection), 1238 for the rest.
_GLOBAL_ONLY = frozenset(("max_allowed_packet", "max_connections", "connect_timeout"))


def _var_size(name: str, value: object) -> int:
    """Bytes a stored variable costs, roughly: its name and value plus a dict entry."""
    return len(name) + (len(value) if isinstance(value, str) else 8) + 64


def account_change_refused() -> sql.SqlError:
    """SET PASSWORD, ALTER/CREATE/DROP USER, GRANT, REVOKE: accounts live in cdc.toml."""
    return sql.SqlError(
        "The binlog server is running with the --users-from-cdc.toml option so it cannot execute "
        "this statement: accounts and passwords are the [[dumper.users]] entries of cdc.toml "
        "(password_hash, sha2_digest); change them there and restart",
        1290,
        "HY000",
    )


class QueryExecutor:
    """Executes one session's statements against the shared context."""

    def __init__(self, ctx: ServerContext, state: SessionState) -> None:
        self.ctx = ctx
        self.state = state
        # What SET has stored so far, an upper estimate (overwrites are not subtracted): a
        # recount happens only when it passes the budget, so each SET stays O(1) amortised.
        self._var_bytes = 0

    def execute(self, stmt: sql.Statement) -> Result:
        handler = getattr(self, f"_do_{type(stmt).__name__}")
        return handler(stmt)

    # -- expressions ---------------------------------------------------------------------------
    def evaluate(self, expr: sql.Expr) -> VarValue | float:
        if isinstance(expr, sql.Literal):
            return expr.value
        if isinstance(expr, sql.UserVar):
            return self.state.user_vars.get(expr.name)
        if isinstance(expr, sql.SysVar):
            return self.system_variable(expr.scope, expr.name)
        return self._function(expr)

    def system_variable(self, scope: str, name: str) -> VarValue:
        if scope != "global" and name in self.state.session_vars:
            return self.state.session_vars[name]
        if name in LIVE_VARIABLES:
            live = self.ctx.live_variables((name,))
            if name in live:
                return live[name]
        if name in self.ctx.variables:
            return self.ctx.variables[name]
        raise sql.SqlError(f"Unknown system variable '{name}'", 1193, "HY000")

    def _function(self, f: sql.Func) -> VarValue | float:
        name, args = f.name, [self.evaluate(a) for a in f.args]
        st = self.state
        user = st.user.name if st.user else ""
        simple = {
            "VERSION": lambda: self.ctx.config.version,
            "DATABASE": lambda: st.db,
            "SCHEMA": lambda: st.db,
            "CONNECTION_ID": lambda: st.conn_id,
            "USER": lambda: f"{user}@{st.host}",
            "SESSION_USER": lambda: f"{user}@{st.host}",
            "SYSTEM_USER": lambda: f"{user}@{st.host}",
            "CURRENT_USER": lambda: f"{user}@%",
            "UUID": lambda: str(uuid.uuid4()),
            "LAST_INSERT_ID": lambda: 0,
            "ROW_COUNT": lambda: -1,
            "FOUND_ROWS": lambda: 0,
            "NOW": lambda: time.strftime("%Y-%m-%d %H:%M:%S"),
            "CURRENT_TIMESTAMP": lambda: time.strftime("%Y-%m-%d %H:%M:%S"),
            "LOCALTIME": lambda: time.strftime("%Y-%m-%d %H:%M:%S"),
            "LOCALTIMESTAMP": lambda: time.strftime("%Y-%m-%d %H:%M:%S"),
            "UTC_TIMESTAMP": lambda: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        }
        if name == "UNIX_TIMESTAMP" and not args:
            return int(time.time())
        if name in simple and not args:
            return simple[name]()
        if name in ("BINLOG_GTID_POS", "GTID_SUBTRACT"):
            return ""  # no GTIDs in the global binlog
        if name == "GTID_SUBSET":
            return 1
        raise sql.SqlError(
            f"FUNCTION {name} does not exist or is not supported by the binlog server", 1305
        )

    # -- SELECT / SET --------------------------------------------------------------------------
    def _do_Select(self, stmt: sql.Select) -> Result:
        values = [self.evaluate(item.expr) for item in stmt.items]
        columns = [_value_column(i.name, v) for i, v in zip(stmt.items, values, strict=True)]
        return RowsResult(columns, [values])

    def _do_SetVars(self, stmt: sql.SetVars) -> Result:
        for a in stmt.assignments:  # checked first: MySQL sets nothing when one is refused
            if a.kind == "global":
                raise denied("SUPER")
            if a.kind == "user":
                continue
            if a.name in _GLOBAL_ONLY:
                raise sql.SqlError(
                    f"SESSION variable '{a.name}' is read-only. Use SET GLOBAL to assign the value",
                    1621,
                    "HY000",
                )
            if a.name not in SETTABLE_SESSION_VARIABLES:
                if a.name in self.ctx.variables:
                    raise sql.SqlError(f"Variable '{a.name}' is a read only variable", 1238)
                raise sql.SqlError(f"Unknown system variable '{a.name}'", 1193, "HY000")
        values = [self.evaluate(a.expr) for a in stmt.assignments]
        self._var_bytes += sum(
            _var_size(a.name, v) for a, v in zip(stmt.assignments, values, strict=True)
        )
        if self._var_bytes > self.ctx.config.max_allowed_packet:
            self._recount_vars(stmt.assignments, values)
        for a, value in zip(stmt.assignments, values, strict=True):
            if a.kind == "user":
                self.state.user_vars[a.name] = value  # type: ignore[assignment]
            else:
                self.state.session_vars[a.name] = value  # type: ignore[assignment]
        return OkResult()

    def _recount_vars(self, new: list[sql.Assignment], values: list[object]) -> None:
        """The exact size the variables would have after this SET; more than max_allowed_packet
        (one connection may hold as much as one command brings) is refused, nothing set."""
        st = self.state
        after = {("user", k): v for k, v in st.user_vars.items()}
        after.update({("session", k): v for k, v in st.session_vars.items()})
        after.update({(a.kind, a.name): v for a, v in zip(new, values, strict=True)})
        total = sum(_var_size(name, v) for (_, name), v in after.items())
        if total > self.ctx.config.max_allowed_packet:
            raise sql.SqlError(
                f"Out of memory for this connection's variables (needed {total} bytes): user and "
                f"session variables may hold at most max_allowed_packet "
                f"({self.ctx.config.max_allowed_packet} bytes) per connection",
                1037,
                "HY001",
            )
        self._var_bytes = total

    def _do_AccountChange(self, stmt: sql.AccountChange) -> Result:
        raise account_change_refused()

    def _do_Noop(self, stmt: sql.Noop) -> Result:
        return OkResult()

    def _do_Use(self, stmt: sql.Use) -> Result:
        self.state.db = stmt.db
        return OkResult()

    # -- variables -----------------------------------------------------------------------------
    def _do_ShowVariables(self, stmt: sql.ShowVariables) -> Result:
        if stmt.status:
            values: dict[str, VarValue] = {
                "Uptime": int(time.time() - self.ctx.started),
                "Threads_connected": len(self.ctx.sessions),
                "Ssl_version": "",
                "Ssl_cipher": "",
                "Binlog_dump_clients": sum(
                    1 for s in self.ctx.sessions.values() if s.state.command == "Binlog Dump"
                ),
            }
        else:
            values = {**self.ctx.variables, **self.ctx.live_variables()}
            if stmt.scope != "global":
                values.update(self.state.session_vars)
        conds = [(c.op, c.values) for c in stmt.conditions]
        names = filter_names(values, conds)
        rows = [(n, "" if values[n] is None else values[n]) for n in names]
        return RowsResult(_cols("Variable_name", "Value"), rows)

    # -- binlog --------------------------------------------------------------------------------
    def _require(self, *privileges: str) -> None:
        if not has_any(self.state.user, *privileges):
            raise denied(*privileges)

    def _do_ShowMasterStatus(self, stmt: sql.ShowMasterStatus) -> Result:
        self._require("SUPER", "REPLICATION CLIENT", "BINLOG MONITOR")
        columns = [
            Column("File"),
            Column("Position", **LONGLONG_U),
            Column("Binlog_Do_DB"),
            Column("Binlog_Ignore_DB"),
            Column("Executed_Gtid_Set"),
        ]
        names = self.ctx.files.names()
        if not names:
            return RowsResult(columns)
        last = names[-1]
        executed = self.ctx.live_variables(("gtid_executed",)).get("gtid_executed", "")
        return RowsResult(columns, [(last, self.ctx.files.complete_end(last), "", "", executed)])

    def _do_ShowBinaryLogs(self, stmt: sql.ShowBinaryLogs) -> Result:
        self._require("SUPER", "REPLICATION CLIENT", "BINLOG MONITOR")
        columns = [Column("Log_name"), Column("File_size", **LONGLONG_U), Column("Encrypted")]
        return RowsResult(columns, [(f.name, f.size, "No") for f in self.ctx.files.files()])

    def _do_ShowBinlogEvents(self, stmt: sql.ShowBinlogEvents) -> Result:
        self._require("REPLICATION SLAVE", "BINLOG MONITOR")
        files = self.ctx.files
        prefix = "Error when executing command SHOW BINLOG EVENTS: "
        columns = [
            Column("Log_name"),
            Column("Pos", **LONGLONG_U),
            Column("Event_type"),
            Column("Server_id", **LONGLONG_U),
            Column("End_log_pos", **LONGLONG_U),
            Column("Info"),
        ]
        names = files.names()
        name = files.resolve(stmt.file) if stmt.file else (names[0] if names else None)
        if name is None:
            if not stmt.file:
                return RowsResult(columns)
            raise sql.SqlError(prefix + "Could not find target log", 1220, "HY000")
        pos = START if stmt.pos is None else stmt.pos
        try:
            # (FROM p is checked against the file's boundaries; the start needs no walk)
            if pos < START or (pos > START and not files.boundary_neighbours(name, pos)[0]):
                raise sql.SqlError(prefix + "Wrong offset or I/O error", 1220, "HY000")
            crc_len = 4 if fde_checksum_alg(files.read_fde(name).data) == 1 else 0
        except (BinlogFileError, OSError) as exc:
            raise sql.SqlError(
                prefix + f"I/O error reading '{name}': {exc}", 1220, "HY000"
            ) from None
        first, stop = stmt.offset, None if stmt.limit is None else stmt.offset + stmt.limit

        def rows() -> Iterator[tuple | None]:
            # Lazy: the session sends rows as they are read, a bounded number per loop turn, so
            # a file of any size costs neither memory nor a stalled loop (docs/dumper.md). A
            # None is a skipped event (LIMIT's offset): no row, but a turn of the budget.
            try:
                for i, e in enumerate(files.events(name, pos)):
                    if stop is not None and i >= stop:
                        return
                    if i < first:
                        yield None
                        continue
                    yield (
                        name,
                        e.pos,
                        event_type_name(e.type_code),
                        e.server_id,
                        e.log_pos,
                        event_info(
                            e, 0 if e.type_code == EventType.FORMAT_DESCRIPTION else crc_len
                        ),
                    )
            except (BinlogFileError, OSError) as exc:
                raise sql.SqlError(
                    prefix + f"I/O error reading '{name}': {exc}", 1220, "HY000"
                ) from None

        return RowsResult(columns, rows())

    def _do_Purge(self, stmt: sql.Purge) -> Result:
        if not has_any(self.state.user, "SUPER", "BINLOG ADMIN"):
            raise denied("SUPER", "BINLOG_ADMIN")
        if self.ctx.read_only():
            raise sql.SqlError(
                "The MySQL server is running with the --read-only option so it cannot execute "
                "this statement (an HA follower: PURGE on the leader)",
                1290,
                "HY000",
            )
        try:
            if stmt.to is not None:
                victims = self.ctx.files.victims_to(self.ctx.files.resolve(stmt.to) or stmt.to)
            else:
                victims = self.ctx.files.victims_before(parse_purge_date(stmt.before or ""))
            # As MySQL 8 and MariaDB: a file a consumer still reads stops the purge there (logged).
            retention.purge_held(self.ctx, victims, f"PURGE by connection {self.state.conn_id}")
        except BinlogFileError:
            raise sql.SqlError("Target log not found in binlog index", 1373, "HY000") from None
        except ValueError as exc:
            raise sql.SqlError(f"Incorrect datetime value in PURGE: {exc}", 1292, "22007") from None
        return OkResult()

    # -- replicas and connections --------------------------------------------------------------
    def _do_ShowReplicas(self, stmt: sql.ShowReplicas) -> Result:
        self._require("REPLICATION SLAVE", "BINLOG MONITOR")  # MySQL: REPLICATION SLAVE
        if stmt.new_names:
            columns = _cols("Server_Id", "Host", "Port", "Source_Id", "Replica_UUID")
        else:
            columns = _cols("Server_id", "Host", "Port", "Master_id", "Slave_UUID")
        columns[0] = Column(columns[0].name, **LONGLONG_U)
        columns[2] = Column(columns[2].name, **LONGLONG_U)
        columns[3] = Column(columns[3].name, **LONGLONG_U)
        rows = []
        for conn_id, reg in sorted(self.ctx.replicas.items()):
            session = self.ctx.sessions.get(conn_id)
            uv = session.state.user_vars if session else {}
            slave_uuid = uv.get("replica_uuid") or uv.get("slave_uuid") or ""
            rows.append((reg.server_id, reg.host, reg.port, self.ctx.config.server_id, slave_uuid))
        return RowsResult(columns, rows)

    def _do_ShowProcesslist(self, stmt: sql.ShowProcesslist) -> Result:
        columns = [Column("Id", **LONGLONG_U), *_cols("User", "Host", "db", "Command")]
        columns += [Column("Time", ColumnType.LONGLONG), *_cols("State", "Info")]
        now = time.time()
        rows = []
        me = self.state.user
        everyone = has_any(me, "PROCESS")  # without it MySQL lists one's own user's threads
        for cid, s in sorted(self.ctx.sessions.items()):
            st = s.state
            if not everyone and (st.user is None or me is None or st.user.name != me.name):
                continue
            user = st.user.name if st.user else "unauthenticated user"
            rows.append(
                (
                    cid,
                    user,
                    f"{st.host}:{st.port}",
                    st.db,
                    st.command,
                    int(now - st.since),
                    "",
                    st.info,
                )
            )
        return RowsResult(columns, rows)

    def _do_Kill(self, stmt: sql.Kill) -> Result:
        target = self.ctx.sessions.get(stmt.connection_id)
        if target is None:
            raise sql.SqlError(f"Unknown thread id: {stmt.connection_id}", 1094, "HY000")
        me = self.state.user
        owner = target.state.user
        if not (me and (has_any(me, "SUPER") or (owner is not None and owner.name == me.name))):
            raise sql.SqlError(f"You are not owner of thread {stmt.connection_id}", 1095, "HY000")
        if not stmt.query_only or target.state.command == "Binlog Dump":
            target.kill()
        return OkResult()

    def _do_ShowGrants(self, stmt: sql.ShowGrants) -> Result:
        me = self.state.user.name if self.state.user else ""
        name = stmt.user or me
        if name != me and not has_any(self.state.user, "SUPER"):
            # MySQL: SHOW GRANTS for another account needs SELECT on the mysql schema
            raise sql.SqlError(
                f"Access denied for user '{me}'@'%' to database 'mysql'", 1044, "42000"
            )
        user = self.ctx.user(name)
        if user is None:
            raise sql.SqlError(
                f"There is no such grant defined for user '{name}' on host '%'", 1141
            )
        return RowsResult(_cols(f"Grants for {name}@%"), [(g,) for g in grants(user)])

    def _do_ShowEmpty(self, stmt: sql.ShowEmpty) -> Result:
        return RowsResult(_cols(*stmt.columns))

    # -- schema --------------------------------------------------------------------------------
    def _db(self, db: str | None) -> str:
        db = db or self.state.db
        if not db:
            raise sql.SqlError("No database selected", 1046, "3D000")
        return db

    def _table(self, db: str | None, name: str) -> TableSchema:
        db = self._db(db)
        table = self.ctx.schema.table(db, name)
        if table is None:
            raise sql.SqlError(f"Table '{db}.{name}' doesn't exist", 1146, "42S02")
        return table

    def _do_ShowDatabases(self, stmt: sql.ShowDatabases) -> Result:
        dbs = ["information_schema", *self.ctx.schema.databases()]
        if stmt.like is not None:
            rx = like_to_regex(stmt.like)
            dbs = [d for d in dbs if rx.fullmatch(d)]
        return RowsResult(_cols("Database"), [(d,) for d in dbs])

    def _do_ShowTables(self, stmt: sql.ShowTables) -> Result:
        db = self._db(stmt.db)
        names = self.ctx.schema.tables(db)
        if stmt.like is not None:
            rx = like_to_regex(stmt.like)
            names = [n for n in names if rx.fullmatch(n)]
        if stmt.table_type is not None and stmt.table_type.upper() != "BASE TABLE":
            names = []
        if stmt.full:
            return RowsResult(
                _cols(f"Tables_in_{db}", "Table_type"), [(n, "BASE TABLE") for n in names]
            )
        return RowsResult(_cols(f"Tables_in_{db}"), [(n,) for n in names])

    def _do_ShowCreateTable(self, stmt: sql.ShowCreateTable) -> Result:
        table = self._table(stmt.db, stmt.table)
        return RowsResult(_cols("Table", "Create Table"), [(table.name, table.create_statement())])

    def _do_ShowColumns(self, stmt: sql.ShowColumns) -> Result:
        table = self._table(stmt.db, stmt.table)
        rows: list[Sequence[object]] = []
        for c in table.columns:
            null = "YES" if c.nullable else "NO"
            if stmt.full:
                rows.append(
                    (
                        c.name,
                        c.column_type,
                        c.collation,
                        null,
                        c.key,
                        c.default,
                        c.extra,
                        "select",
                        c.comment,
                    )
                )
            else:
                rows.append((c.name, c.column_type, null, c.key, c.default, c.extra))
        if stmt.full:
            names = (
                "Field",
                "Type",
                "Collation",
                "Null",
                "Key",
                "Default",
                "Extra",
                "Privileges",
                "Comment",
            )
        else:
            names = ("Field", "Type", "Null", "Key", "Default", "Extra")
        return RowsResult(_cols(*names), rows)

    def _do_ShowIndex(self, stmt: sql.ShowIndex) -> Result:
        """MySQL 5.7's columns, in its order (go-mysql's canal reads them by position)."""
        table = self._table(stmt.db, stmt.table)
        nullable = {c.name.lower(): c.nullable for c in table.columns}
        rows: list[Sequence[object]] = [
            (
                table.name,
                0 if index.unique else 1,
                index.name,
                seq,
                column,
                None if index.kind == "FULLTEXT" else "A",
                None,  # Cardinality: unknown to the binlog server
                sub_part,
                None,
                "YES" if nullable.get(column.lower(), False) else "",
                index.kind,
                "",
                "",
            )
            for index in table.indexes()
            for seq, (column, sub_part) in enumerate(index.columns, 1)
        ]
        names = (
            "Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Collation",
            "Cardinality", "Sub_part", "Packed", "Null", "Index_type", "Comment", "Index_comment",
        )  # fmt: skip
        numeric = {"Non_unique", "Seq_in_index", "Cardinality", "Sub_part"}
        return RowsResult(
            [Column(n, **LONGLONG_U) if n in numeric else Column(n) for n in names], rows
        )

    def _do_ShowTableStatus(self, stmt: sql.ShowTableStatus) -> Result:
        """Name, engine and collation from the schema history; sizes and counts are not known
        to a binlog server (NULL, as for a view)."""
        db = self._db(stmt.db)
        names = self.ctx.schema.tables(db)
        if stmt.like is not None:
            rx = like_to_regex(stmt.like)
            names = [n for n in names if rx.fullmatch(n)]
        rows = []
        for name in names:
            t = self.ctx.schema.table(db, name)
            if t is not None:
                rows.append(
                    (t.name, t.engine, 10, "Dynamic", *[None] * 7)
                    + (None, None, None, t.collation, None, "", t.comment)
                )
        return RowsResult(
            _cols(
                "Name",
                "Engine",
                "Version",
                "Row_format",
                "Rows",
                "Avg_row_length",
                "Data_length",
                "Max_data_length",
                "Index_length",
                "Data_free",
                "Auto_increment",
                "Create_time",
                "Update_time",
                "Check_time",
                "Collation",
                "Checksum",
                "Create_options",
                "Comment",
            ),  # fmt: skip
            rows,
        )

    def _do_InfoSchemaSelect(self, stmt: sql.InfoSchemaSelect) -> Result:
        records = self._info_schema_rows(stmt.table)
        if records is None:
            raise sql.SqlError(
                f"Table 'information_schema.{stmt.table}' is not served by the binlog server",
                1146,
                "42S02",
            )
        all_cols = list(records[0]) if records else list(self._info_schema_columns(stmt.table))
        for cond in stmt.where:
            if cond.column not in all_cols:
                raise sql.SqlError(
                    f"Unknown column '{cond.column}' in 'where clause'", 1054, "42S22"
                )
        wanted: list[tuple[str, str]] = []
        for src, out in stmt.columns:
            if src == "*":
                wanted += [(c, c.upper()) for c in all_cols]
            elif src not in all_cols:
                raise sql.SqlError(f"Unknown column '{out}' in 'field list'", 1054, "42S22")
            else:
                wanted.append((src, out))

        def keep(rec: dict[str, object]) -> bool:
            for cond in stmt.where:
                value = "" if rec[cond.column] is None else str(rec[cond.column])
                if cond.op == "LIKE":
                    if not like_to_regex(cond.values[0]).fullmatch(value):
                        return False
                elif value not in cond.values:
                    return False
            return True

        rows = [[rec[c] for c, _ in wanted] for rec in records if keep(rec)]
        if stmt.limit is not None:
            rows = rows[: stmt.limit]
        columns = [
            Column(out, ColumnType.LONGLONG) if src in _NUMERIC_INFO else Column(out)
            for src, out in wanted
        ]
        return RowsResult(columns, rows)

    @staticmethod
    def _info_schema_columns(table: str) -> tuple[str, ...]:
        return {
            "columns": (
                "table_catalog",
                "table_schema",
                "table_name",
                "column_name",
                "ordinal_position",
                "column_default",
                "is_nullable",
                "data_type",
                "character_set_name",
                "collation_name",
                "column_type",
                "column_key",
                "extra",
                "privileges",
                "column_comment",
            ),
            "tables": (
                "table_catalog",
                "table_schema",
                "table_name",
                "table_type",
                "engine",
                "table_collation",
                "table_comment",
            ),
            "schemata": (
                "catalog_name",
                "schema_name",
                "default_character_set_name",
                "default_collation_name",
            ),
            "statistics": (
                "table_catalog",
                "table_schema",
                "table_name",
                "non_unique",
                "index_schema",
                "index_name",
                "seq_in_index",
                "column_name",
                "collation",
                "cardinality",
                "sub_part",
                "packed",
                "nullable",
                "index_type",
                "comment",
                "index_comment",
            ),  # fmt: skip
            "key_column_usage": (
                "constraint_catalog",
                "constraint_schema",
                "constraint_name",
                "table_catalog",
                "table_schema",
                "table_name",
                "column_name",
                "ordinal_position",
                "position_in_unique_constraint",
                "referenced_table_schema",
                "referenced_table_name",
                "referenced_column_name",
            ),  # fmt: skip
        }.get(table, ())

    def _info_schema_rows(self, table: str) -> list[dict[str, object]] | None:
        schema = self.ctx.schema
        if table == "schemata":
            return [
                dict(
                    zip(
                        self._info_schema_columns(table),
                        ("def", db, "utf8mb4", "utf8mb4_general_ci"),
                        strict=True,
                    )
                )
                for db in schema.databases()
            ]
        if table not in ("columns", "tables", "statistics", "key_column_usage"):
            return None
        out: list[dict[str, object]] = []
        for db in schema.databases():
            for name in schema.tables(db):
                t = schema.table(db, name)
                if t is None:
                    continue
                if table in ("statistics", "key_column_usage"):
                    out += self._index_rows(table, db, t)
                    continue
                if table == "tables":
                    values: tuple[object, ...] = (
                        "def",
                        db,
                        name,
                        "BASE TABLE",
                        t.engine,
                        t.collation,
                        t.comment,
                    )
                    out.append(dict(zip(self._info_schema_columns(table), values, strict=True)))
                    continue
                for i, c in enumerate(t.columns, 1):
                    values = (
                        "def",
                        db,
                        name,
                        c.name,
                        i,
                        c.default,
                        "YES" if c.nullable else "NO",
                        c.data_type,
                        c.charset,
                        c.collation,
                        c.column_type,
                        c.key,
                        c.extra,
                        "select",
                        c.comment,
                    )
                    out.append(dict(zip(self._info_schema_columns(table), values, strict=True)))
        return out

    def _index_rows(self, table: str, db: str, t: TableSchema) -> list[dict[str, object]]:
        """STATISTICS: a row per index column; KEY_COLUMN_USAGE: those of unique indexes."""
        names = self._info_schema_columns(table)
        nullable = {c.name.lower(): c.nullable for c in t.columns}
        out = []
        for index in t.indexes():
            if table == "key_column_usage" and not index.unique:
                continue
            for seq, (column, sub_part) in enumerate(index.columns, 1):
                if table == "statistics":
                    values: tuple[object, ...] = (
                        "def", db, t.name, 0 if index.unique else 1, db, index.name, seq,
                        column, "A", None, sub_part, None,
                        "YES" if nullable.get(column.lower(), False) else "", index.kind, "", "",
                    )  # fmt: skip
                else:
                    values = ("def", db, index.name, "def", db, t.name, column, seq)
                    values += (None, None, None, None)
                out.append(dict(zip(names, values, strict=True)))
        return out
