"""Snapshot reads: SELECT over a logical table answered with its rows exactly as of a global
binlog position, read from the DN shards without locks (docs/snapshot-reads.md). Exports
`SnapshotSource` (the cluster: GMS and DNs) and `SnapshotRead` (one statement)."""

from dumper.server.snapshot.read import SnapshotRead
from dumper.server.snapshot.source import SnapshotSource

__all__ = ["SnapshotRead", "SnapshotSource"]
