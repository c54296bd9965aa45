"""Answers about the served binlog: SHOW MASTER STATUS (its GTID state included), SHOW BINARY
LOGS, SHOW BINLOG EVENTS (streamed) and PURGE BINARY LOGS."""

from __future__ import annotations

from collections.abc import Iterator

from cdc.binlog.constants import EventType
from cdc.protocol.resultset import Column
from dumper.server.handlers import OkResult, Result, RowsResult, SqlError
from dumper.server.sql import statements as st
from dumper.server.sql.answers import LONGLONG_U, Answers
from dumper.server.sql.event_info import event_info, event_type_name
from dumper.server.store.binlog_files import (
    START,
    BinlogFileError,
    fde_checksum_alg,
    parse_purge_date,
)
from dumper.server.users import denied, has_any, require


class BinlogAnswers(Answers):
    """The served binlog's status and PURGE."""

    def show_master_status(self, stmt: st.ShowMasterStatus) -> Result:
        require(self.state.user, "SUPER", "REPLICATION CLIENT", "BINLOG MONITOR")
        columns = [
            Column("File"),
            Column("Position", **LONGLONG_U),
            Column("Binlog_Do_DB"),
            Column("Binlog_Ignore_DB"),
            Column("Executed_Gtid_Set"),
        ]
        pinned = self.state.pinned  # inside a snapshot transaction: where it reads
        names = self.ctx.served.files.names()
        if not names:
            return RowsResult(columns)
        last, end = pinned or (names[-1], self.ctx.served.files.complete_end(names[-1]))
        live = self.ctx.served.live_variables(("gtid_executed",), upto=pinned)
        return RowsResult(columns, [(last, end, "", "", live.get("gtid_executed", ""))])

    def show_binary_logs(self, stmt: st.ShowBinaryLogs) -> Result:
        require(self.state.user, "SUPER", "REPLICATION CLIENT", "BINLOG MONITOR")
        columns = [Column("Log_name"), Column("File_size", **LONGLONG_U), Column("Encrypted")]
        return RowsResult(columns, [(f.name, f.size, "No") for f in self.ctx.served.files.files()])

    def show_binlog_events(self, stmt: st.ShowBinlogEvents) -> Result:
        require(self.state.user, "REPLICATION SLAVE", "BINLOG MONITOR")
        files = self.ctx.served.files
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
        name = (
            files.resolve(stmt.file, archived=True) if stmt.file else (names[0] if names else None)
        )
        if name is None:
            if not stmt.file:
                return RowsResult(columns)
            raise SqlError(prefix + "Could not find target log", 1220, "HY000")
        pos = START if stmt.pos is None else stmt.pos
        try:
            # (FROM p is checked against the file's boundaries; the start needs no walk)
            if pos < START or (pos > START and not files.boundary_neighbours(name, pos)[0]):
                raise SqlError(prefix + "Wrong offset or I/O error", 1220, "HY000")
            crc_len = 4 if fde_checksum_alg(files.read_fde(name).data) == 1 else 0
        except (BinlogFileError, OSError) as exc:
            raise SqlError(prefix + f"I/O error reading '{name}': {exc}", 1220, "HY000") from None
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
                raise SqlError(
                    prefix + f"I/O error reading '{name}': {exc}", 1220, "HY000"
                ) from None

        return RowsResult(columns, rows())

    def purge(self, stmt: st.Purge) -> Result:
        if not has_any(self.state.user, "SUPER", "BINLOG ADMIN"):
            raise denied("SUPER", "BINLOG_ADMIN")
        if self.ctx.read_only():
            raise SqlError(
                "The MySQL server is running with the --read-only option so it cannot execute "
                "this statement (an HA follower: PURGE on the leader)",
                1290,
                "HY000",
            )
        try:
            if stmt.to is not None:
                victims = self.ctx.served.files.victims_to(
                    self.ctx.served.files.resolve(stmt.to) or stmt.to
                )
            else:
                victims = self.ctx.served.files.victims_before(parse_purge_date(stmt.before or ""))
            # As MySQL 8 and MariaDB: a file a consumer still reads stops the purge there (logged).
            self.ctx.retention.purge(victims, f"PURGE by connection {self.state.conn_id}")
        except BinlogFileError:
            raise SqlError("Target log not found in binlog index", 1373, "HY000") from None
        except ValueError as exc:
            raise SqlError(f"Incorrect datetime value in PURGE: {exc}", 1292, "22007") from None
        return OkResult()
