"""binlog_writer: append-only writer of MySQL binlog files (binlog.NNNNNN + binlog.index),
with rotation, fsync policy and crash recovery of a partial tail. Exports BinlogWriter & co."""

from .fsync import FsyncMode, FsyncPolicy
from .recovery import Boundary, TailScan, scan
from .writer import BinlogWriter, RecoveryReport, TxnPosition

__all__ = [
    "BinlogWriter",
    "Boundary",
    "FsyncMode",
    "FsyncPolicy",
    "RecoveryReport",
    "TailScan",
    "TxnPosition",
    "scan",
]
