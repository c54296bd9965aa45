"""Dumper: serves the global binlog files over the MySQL replication protocol (the writer lives in
`binlog_writer`). Exports `serve`, `Server`, `BinlogSender`, the notifiers and `SchemaProvider`."""

import cdc  # noqa: F401  (first: it decides between compiled and pure modules, cdc/compiled.py)
from dumper.binlog_files import BinlogFiles
from dumper.binlog_sender import (
    BinlogSender,
    CurrentEventNotifier,
    DumpError,
    EventNotifier,
    Notifier,
    PollNotifier,
)
from dumper.schema import ColumnSchema, InMemorySchemaProvider, SchemaProvider, TableSchema
from dumper.server import Server, serve

__all__ = [
    "BinlogFiles",
    "BinlogSender",
    "ColumnSchema",
    "CurrentEventNotifier",
    "DumpError",
    "EventNotifier",
    "InMemorySchemaProvider",
    "Notifier",
    "PollNotifier",
    "SchemaProvider",
    "Server",
    "TableSchema",
    "serve",
]
