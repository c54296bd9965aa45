"""Answers about connections and accounts: SHOW SLAVE HOSTS / REPLICAS, SHOW PROCESSLIST, KILL,
SHOW GRANTS, USE, and the statements refused (account changes) or accepted and ignored."""

from __future__ import annotations

import time

from cdc.protocol.constants import ColumnType
from cdc.protocol.resultset import Column
from dumper.server.handlers import OkResult, Result, RowsResult, SqlError
from dumper.server.sessions import account
from dumper.server.sql import statements as st
from dumper.server.sql.answers import LONGLONG_U, Answers, cols
from dumper.server.users import grants, has_any, require


def account_change_refused() -> SqlError:
    """SET PASSWORD, ALTER/CREATE/DROP USER, GRANT, REVOKE: accounts live in cdc.toml."""
    return SqlError(
        "The binlog server is running with the --users-from-cdc.toml option so it cannot execute "
        "this statement: accounts and passwords are the [[dumper.users]] entries of cdc.toml "
        "(password_hash, sha2_digest); change them there and restart",
        1290,
        "HY000",
    )


class SessionAnswers(Answers):
    """Connections, replicas and accounts."""

    def show_replicas(self, stmt: st.ShowReplicas) -> Result:
        require(self.state.user, "REPLICATION SLAVE", "BINLOG MONITOR")  # MySQL: REPLICATION SLAVE
        if stmt.new_names:
            columns = cols("Server_Id", "Host", "Port", "Source_Id", "Replica_UUID")
        else:
            columns = cols("Server_id", "Host", "Port", "Master_id", "Slave_UUID")
        columns[0] = Column(columns[0].name, **LONGLONG_U)
        columns[2] = Column(columns[2].name, **LONGLONG_U)
        columns[3] = Column(columns[3].name, **LONGLONG_U)
        rows = []
        for conn_id, reg in sorted(self.ctx.replicas.items()):
            session = self.ctx.sessions.live.get(conn_id)
            uv = session.state.user_vars if session else {}
            slave_uuid = uv.get("replica_uuid") or uv.get("slave_uuid") or ""
            rows.append((reg.server_id, reg.host, reg.port, self.ctx.config.server_id, slave_uuid))
        return RowsResult(columns, rows)

    def show_processlist(self, stmt: st.ShowProcesslist) -> Result:
        columns = [Column("Id", **LONGLONG_U), *cols("User", "Host", "db", "Command")]
        columns += [Column("Time", ColumnType.LONGLONG), *cols("State", "Info")]
        now = time.time()
        rows = []
        me = self.state.user
        everyone = has_any(me, "PROCESS")  # without it MySQL lists one's own user's threads
        for cid, s in sorted(self.ctx.sessions.live.items()):
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

    def kill(self, stmt: st.Kill) -> Result:
        target = self.ctx.sessions.live.get(stmt.connection_id)
        if target is None:
            raise SqlError(f"Unknown thread id: {stmt.connection_id}", 1094, "HY000")
        me = self.state.user
        owner = target.state.user
        if not (me and (has_any(me, "SUPER") or (owner is not None and owner.name == me.name))):
            raise SqlError(f"You are not owner of thread {stmt.connection_id}", 1095, "HY000")
        if not stmt.query_only or target.state.command == "Binlog Dump":
            target.kill()
        return OkResult()

    def show_grants(self, stmt: st.ShowGrants) -> Result:
        me = self.state.user.name if self.state.user else ""
        name = stmt.user or me
        if name != me and not has_any(self.state.user, "SUPER"):
            # MySQL: SHOW GRANTS for another account needs SELECT on the mysql schema
            raise SqlError(f"Access denied for user '{me}'@'%' to database 'mysql'", 1044, "42000")
        user = account(self.ctx.config, name)
        if user is None:
            raise SqlError(f"There is no such grant defined for user '{name}' on host '%'", 1141)
        return RowsResult(cols(f"Grants for {name}@%"), [(g,) for g in grants(user)])

    def show_empty(self, stmt: st.ShowEmpty) -> Result:
        return RowsResult(cols(*stmt.columns))

    def account_change(self, stmt: st.AccountChange) -> Result:
        raise account_change_refused()

    def noop(self, stmt: st.Noop) -> Result:
        return OkResult()

    def use(self, stmt: st.Use) -> Result:
        self.state.db = stmt.db
        return OkResult()
