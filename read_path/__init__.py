"""The read path: a SELECT over a logical table answered with its rows exactly as of a global
binlog position, read from the DN shards without locks (docs/snapshot-reads.md), and the
changed-keys scan of the global binlog it reconciles with (`FirstImages`, over `TableChanges`:
the backfill's too), and the index of changed keys a read as of an old point uses instead
(`build_segment`: the server builds it, dumper/server/store/change_index.py). The server hands its SQL answers a
`TableReads` (built from a `SnapshotSource`, the served files and the writer's progress); its
requests are `request`'s types; `ColumnDef` is a result column."""

import cdc  # noqa: F401  (first: it decides between compiled and pure modules, cdc/compiled.py)
from read_path import request
from read_path.change_index import SEGMENT_BYTES, SegmentIndex, build_segment, tail_crc
from read_path.changes import first_ddl
from read_path.first_images import (
    FirstImages,
    Image,
    TableChangedByDdl,
    TableChanges,
    TableShapeDiffers,
)
from read_path.reads import TableReads
from read_path.request import unsupported
from read_path.served import Progress, ServedFiles
from read_path.source import SnapshotSource
from read_path.values import ColumnDef

__all__ = [
    "SEGMENT_BYTES",
    "ColumnDef",
    "FirstImages",
    "Image",
    "Progress",
    "SegmentIndex",
    "ServedFiles",
    "SnapshotSource",
    "TableChangedByDdl",
    "TableChanges",
    "TableShapeDiffers",
    "TableReads",
    "build_segment",
    "first_ddl",
    "request",
    "tail_crc",
    "unsupported",
]
