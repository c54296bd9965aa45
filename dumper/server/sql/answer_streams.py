"""SHOW BINARY STREAMS: the streams of a multi-stream binlog (docs/streams.md), read from each
stream's own files, as PolarDB-X's main port lists its Binlog-X streams."""

from __future__ import annotations

from cdc.protocol.resultset import Column
from cdc.streams import stream_dir, stream_gtid_domain, stream_port, stream_server_uuid
from dumper.server.handlers import Result, RowsResult
from dumper.server.sql import statements as st
from dumper.server.sql.answers import LONGLONG_U, Answers
from dumper.server.store.binlog_files import BinlogFiles
from dumper.server.store.gtid_state import GtidState
from dumper.server.store.mariadb_gtid_state import MariadbGtidState
from dumper.server.users import require


class StreamAnswers(Answers):
    def show_binary_streams(self, stmt: st.ShowBinaryStreams) -> Result:
        """One row per stream: its number, port, last file, the end of its last whole
        transaction, its GTID set. One stream (`streams = 1`): the served binlog itself."""
        require(self.state.user, "SUPER", "REPLICATION CLIENT", "BINLOG MONITOR")
        columns = [
            Column("Stream"),
            Column("Port", **LONGLONG_U),
            Column("File"),
            Column("Position", **LONGLONG_U),
            Column("Executed_Gtid_Set"),
        ]
        d = self.ctx.config
        if d.streams == 1:
            return RowsResult(columns, [self._row("stream0", d.port, self.ctx.served.files, None)])
        rows = []
        for i in range(d.streams):
            files = BinlogFiles(stream_dir(d, i), d.binlog_base)
            rows.append(self._row(f"stream{i}", stream_port(d, i), files, i))
        return RowsResult(columns, rows)

    def _row(self, name: str, port: int, files: BinlogFiles, stream: int | None) -> tuple:
        names = files.names()
        if not names:
            return (name, port, "", 0, "")
        last = names[-1]
        return (name, port, last, files.complete_end(last), self._gtids(files, stream))

    def _gtids(self, files: BinlogFiles, stream: int | None) -> str:
        d, ctx = self.ctx.config, self.ctx
        if stream is None:
            return str(ctx.served.live_variables(("gtid_executed",)).get("gtid_executed", ""))
        if d.flavor == "mariadb":
            state = MariadbGtidState(files, stream_gtid_domain(d, stream), d.server_id)
            return state.variables()["gtid_binlog_pos"]
        if not ctx.served.server_uuid:
            return ""
        return str(GtidState(files, stream_server_uuid(ctx.served.server_uuid, stream)).executed())
