"""The MySQL protocol server of the global binlog, in parts layered wire -> sql / dump -> store
(go-mysql's server split): `wire/` (accept loop, connection, handshake, command switch, prepared
statements), `sql/` (parser and answers by subject; rows of logical tables come from the read
path, `read_path/`, through the `TableReads` it is handed), `dump/` (binlog dump, ack gate) and
`store/` (the served files: index and reads, notifiers, GTID state, retention), joined by the
handler interfaces of `handlers.py`; `server.serve` assembles them, `ServeProcess` runs them in a
child process. It reads the binlog files; it never writes them."""

from dumper.server.dump.ack_gate import AckGate, ack_packet, parse_ack
from dumper.server.dump.binlog_sender import BinlogSender
from dumper.server.dump.request import DumpError
from dumper.server.serve_process import ServeProcess
from dumper.server.server import Server, archive_of, serve
from dumper.server.sql.history_schema import HistorySchemaProvider
from dumper.server.sql.schema import (
    ColumnSchema,
    InMemorySchemaProvider,
    SchemaProvider,
    TableSchema,
)
from dumper.server.store.binlog_files import BinlogFiles, check_archive
from dumper.server.store.notifiers import (
    CurrentEventNotifier,
    EventNotifier,
    Notifier,
    PollNotifier,
)

__all__ = [
    "AckGate",
    "BinlogFiles",
    "BinlogSender",
    "ColumnSchema",
    "CurrentEventNotifier",
    "DumpError",
    "EventNotifier",
    "HistorySchemaProvider",
    "InMemorySchemaProvider",
    "Notifier",
    "PollNotifier",
    "SchemaProvider",
    "ServeProcess",
    "Server",
    "TableSchema",
    "ack_packet",
    "archive_of",
    "check_archive",
    "parse_ack",
    "serve",
]
