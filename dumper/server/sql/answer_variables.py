"""Answers about variables: SELECT of expressions (@@system and @user variables, functions),
SET, SHOW VARIABLES and SHOW STATUS."""

from __future__ import annotations

import time
import uuid

from dumper.server.handlers import OkResult, Result, RowsResult, SqlError
from dumper.server.sessions import SessionState
from dumper.server.sql import statements as st
from dumper.server.sql.answers import Answers, SqlContext, cols, value_column
from dumper.server.sql.points import checked
from dumper.server.sql.variables import VarValue, filter_names
from dumper.server.store.served import LIVE_VARIABLES
from dumper.server.users import denied, has_any

READ_AS_OF = "cdc_read_as_of"  # reads as of a past point (sql/points.py)

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
        "idle_readonly_transaction_timeout "
        "net_read_timeout net_write_timeout net_buffer_length sql_auto_is_null "
        "auto_increment_increment auto_increment_offset sql_require_primary_key "
        "explicit_defaults_for_timestamp default_storage_engine default_tmp_storage_engine "
        "binlog_format binlog_row_image gtid_domain_id slave_net_timeout "
        "rpl_semi_sync_slave_enabled sql_slave_skip_counter cdc_read_as_of"
    ).split()
)
# Variables MySQL lets nobody set per session: ER_VARIABLE_IS_READONLY (1621) for
# max_allowed_packet (it is enforced per connection), 1238 for the rest.
_GLOBAL_ONLY = frozenset(("max_allowed_packet", "max_connections", "connect_timeout"))


def _check_point(value: object) -> None:
    """cdc_read_as_of's value: a point as AS OF writes it (sql/points.py), checked at SET."""
    try:
        checked(str(value))
    except SqlError as exc:
        raise SqlError(
            f"Variable '{READ_AS_OF}' can't be set to the value of '{value}': {exc.message}",
            1231,
            "42000",
        ) from None


def _var_size(name: str, value: object) -> int:
    """Bytes a stored variable costs, roughly: its name and value plus a dict entry."""
    return len(name) + (len(value) if isinstance(value, str) else 8) + 64


class VariableAnswers(Answers):
    """One session's variables: what it SET, and the server's (`ctx.variables`, live ones)."""

    def __init__(self, ctx: SqlContext, state: SessionState) -> None:
        super().__init__(ctx, state)
        # What SET has stored so far, an upper estimate (overwrites are not subtracted): a
        # recount happens only when it passes the budget, so each SET stays O(1) amortised.
        self._var_bytes = 0

    def evaluate(self, expr: st.Expr) -> VarValue | float:
        if isinstance(expr, st.Literal):
            return expr.value
        if isinstance(expr, st.UserVar):
            return self.state.user_vars.get(expr.name)
        if isinstance(expr, st.SysVar):
            return self.system_variable(expr.scope, expr.name)
        return self._function(expr)

    def system_variable(self, scope: str, name: str) -> VarValue:
        if scope != "global" and name in self.state.session_vars:
            return self.state.session_vars[name]
        if name in LIVE_VARIABLES:
            live = self.ctx.served.live_variables((name,), upto=self.state.pinned)
            if name in live:
                return live[name]
        if name in self.ctx.variables:
            return self.ctx.variables[name]
        raise SqlError(f"Unknown system variable '{name}'", 1193, "HY000")

    def _function(self, f: st.Func) -> VarValue | float:
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
        raise SqlError(
            f"FUNCTION {name} does not exist or is not supported by the binlog server", 1305
        )

    # -- SELECT / SET --------------------------------------------------------------------------
    def select(self, stmt: st.Select) -> Result:
        values = [self.evaluate(item.expr) for item in stmt.items]
        columns = [value_column(i.name, v) for i, v in zip(stmt.items, values, strict=True)]
        return RowsResult(columns, [values])

    def set_vars(self, stmt: st.SetVars) -> Result:
        for a in stmt.assignments:  # checked first: MySQL sets nothing when one is refused
            if a.kind == "global" and not (
                a.name == READ_AS_OF and has_any(self.state.user, "SUPER")
            ):
                raise denied("SUPER")
            if a.kind == "user":
                continue
            if a.name in _GLOBAL_ONLY:
                raise SqlError(
                    f"SESSION variable '{a.name}' is read-only. Use SET GLOBAL to assign the value",
                    1621,
                    "HY000",
                )
            if a.name not in SETTABLE_SESSION_VARIABLES:
                if a.name in self.ctx.variables:
                    raise SqlError(f"Variable '{a.name}' is a read only variable", 1238)
                raise SqlError(f"Unknown system variable '{a.name}'", 1193, "HY000")
        values = [self.evaluate(a.expr) for a in stmt.assignments]
        for a, value in zip(stmt.assignments, values, strict=True):
            if a.name == READ_AS_OF and a.kind != "user" and value:
                _check_point(value)
        self._var_bytes += sum(
            _var_size(a.name, v) for a, v in zip(stmt.assignments, values, strict=True)
        )
        if self._var_bytes > self.ctx.config.max_allowed_packet:
            self._recount_vars(stmt.assignments, values)
        for a, value in zip(stmt.assignments, values, strict=True):
            if a.kind == "user":
                self.state.user_vars[a.name] = value  # type: ignore[assignment]
            elif a.kind == "global":  # cdc_read_as_of: the sessions that did not SET their own
                self.ctx.variables[a.name] = "" if value is None else str(value)
            else:
                self.state.session_vars[a.name] = value  # type: ignore[assignment]
        return OkResult()

    def _recount_vars(self, new: list[st.Assignment], values: list[object]) -> None:
        """The exact size the variables would have after this SET; more than max_allowed_packet
        (one connection may hold as much as one command brings) is refused, nothing set."""
        st = self.state
        after = {("user", k): v for k, v in st.user_vars.items()}
        after.update({("session", k): v for k, v in st.session_vars.items()})
        after.update({(a.kind, a.name): v for a, v in zip(new, values, strict=True)})
        total = sum(_var_size(name, v) for (_, name), v in after.items())
        if total > self.ctx.config.max_allowed_packet:
            raise SqlError(
                f"Out of memory for this connection's variables (needed {total} bytes): user and "
                f"session variables may hold at most max_allowed_packet "
                f"({self.ctx.config.max_allowed_packet} bytes) per connection",
                1037,
                "HY001",
            )
        self._var_bytes = total

    def show_variables(self, stmt: st.ShowVariables) -> Result:
        if stmt.status:
            values: dict[str, VarValue] = {
                "Uptime": int(time.time() - self.ctx.sessions.started),
                "Threads_connected": len(self.ctx.sessions.live),
                "Ssl_version": "",
                "Ssl_cipher": "",
                "Binlog_dump_clients": sum(
                    1 for s in self.ctx.sessions.live.values() if s.state.command == "Binlog Dump"
                ),
            }
        else:
            values = {
                **self.ctx.variables,
                **self.ctx.served.live_variables(upto=self.state.pinned),
            }
            if stmt.scope != "global":
                values.update(self.state.session_vars)
        conds = [(c.op, c.values) for c in stmt.conditions]
        names = filter_names(values, conds)
        rows = [(n, "" if values[n] is None else values[n]) for n in names]
        return RowsResult(cols("Variable_name", "Value"), rows)
