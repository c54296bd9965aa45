"""Answers about what is kept for whom (docs/retention.md): SHOW CONSUMERS (each named
consumer's position, lag and hold) and SHOW ALL BINARY LOGS (SHOW BINARY LOGS, which stays
MySQL's list of live files, with the archived files before them)."""

from __future__ import annotations

import time

from cdc.protocol.resultset import Column
from dumper.server.handlers import Result, RowsResult
from dumper.server.sql import statements as st
from dumper.server.sql.answers import LONGLONG_U, Answers, cols
from dumper.server.users import require


class HoldAnswers(Answers):
    def show_consumers(self, stmt: st.ShowConsumers) -> Result:
        """One row per named or registered consumer: who, where it got to, how far behind,
        what it holds, and whether (when, why) its hold was dropped."""
        require(self.state.user, "SUPER", "REPLICATION CLIENT", "BINLOG MONITOR")
        columns = [
            *cols("Name", "Server_id", "Server_uuid", "Kind", "Connected", "File"),
            Column("Position", **LONGLONG_U),
            Column("Lag_bytes", **LONGLONG_U),
            *cols("Lag_seconds", "Holds_from", "Dropped", "Dropped_at"),
        ]
        rows = []
        for c in self.ctx.holds.report():
            dropped_at = c["dropped_at"]
            rows.append(
                (
                    c["name"],
                    str(c["server_id"] or ""),
                    c["server_uuid"],
                    "configured" if c["configured"] else "registered",
                    "Yes" if c["connected"] else "No",
                    c["file"],
                    c["position"],
                    c["lag_bytes"],
                    f"{c['lag_s']:.1f}",
                    c["holds"],
                    c["dropped"],
                    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(dropped_at))
                    if dropped_at
                    else "",
                )
            )
        return RowsResult(columns, rows)

    def show_all_binary_logs(self, stmt: st.ShowAllBinaryLogs) -> Result:
        require(self.state.user, "SUPER", "REPLICATION CLIENT", "BINLOG MONITOR")
        files = self.ctx.served.files
        columns = [
            Column("Log_name"),
            Column("File_size", **LONGLONG_U),
            *cols("Encrypted", "Archived", "Path"),
        ]
        live = set(files.names())
        rows = []
        for f in files.readable_files():
            path = files.locate(f.name)
            archived = "No" if f.name in live else "Yes"
            rows.append((f.name, f.size, "No", archived, str(path or "")))
        return RowsResult(columns, rows)
