"""binlog_writer: append-only writer of MySQL binlog files (binlog.NNNNNN + binlog.index),
with rotation, fsync policy and crash recovery of a partial tail; the key a restart resumes
after (`last_written_key`, in `resume_file`); GTID numbering and look-ups in the files (`gtids`: MySQL's layout; `mariadb_gtids`:
MariaDB's); an HA
follower's copier. Other packages import only from here."""

from . import gtids, layout, locate, mariadb_gtids
from .copier import BinlogCopier, CopyError, copy_dump, truncate_copy
from .fsync import FsyncMode, FsyncPolicy
from .gtids import GtidLayout, MysqlGtids
from .layout import file_name, file_number
from .mariadb_gtids import MariadbGtids
from .recovery import Boundary, TailScan, scan
from .recovery_point import RecoveryPoint, mark_event_ending_at, scan_file
from .resume import key_from_mark, last_written_key, resume_file
from .writer import BinlogWriter, RecoveryReport, TxnPosition

__all__ = [
    "BinlogCopier",
    "copy_dump",
    "BinlogWriter",
    "Boundary",
    "CopyError",
    "FsyncMode",
    "FsyncPolicy",
    "GtidLayout",
    "MariadbGtids",
    "MysqlGtids",
    "RecoveryPoint",
    "RecoveryReport",
    "TailScan",
    "TxnPosition",
    "file_name",
    "file_number",
    "gtids",
    "mariadb_gtids",
    "key_from_mark",
    "last_written_key",
    "layout",
    "locate",
    "mark_event_ending_at",
    "resume_file",
    "scan",
    "scan_file",
    "truncate_copy",
]
