"""The MySQL protocol server of the global binlog: sessions, the SQL a replica or a client
sends, binlog dump (`BinlogSender`), the ack gate of HA followers, and the child process it
runs in (`ServeProcess`). It reads the binlog files; it never writes them."""

from dumper.server.ack_gate import AckGate, ack_packet, parse_ack
from dumper.server.binlog_files import BinlogFiles
from dumper.server.binlog_sender import (
    BinlogSender,
    CurrentEventNotifier,
    DumpError,
    EventNotifier,
    Notifier,
    PollNotifier,
)
from dumper.server.history_schema import HistorySchemaProvider
from dumper.server.schema import ColumnSchema, InMemorySchemaProvider, SchemaProvider, TableSchema
from dumper.server.serve_process import ServeProcess
from dumper.server.server import Server, serve

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
    "parse_ack",
    "serve",
]
