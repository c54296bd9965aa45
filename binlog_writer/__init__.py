"""binlog_writer: append-only writer of MySQL binlog files (binlog.NNNNNN + binlog.index),
with rotation, fsync policy and crash recovery of a partial tail; the key a restart resumes
after (`last_written_key`, in `resume_file`); GTID numbering and look-ups in the files
(`gtids`: MySQL's layout; `mariadb_gtids`: MariaDB's); an HA follower's copier; the files a
reader can still read, archived ones included (`readable`). Other packages import only from
here."""

from . import gtids, layout, locate, mariadb_gtids, readable
from .copier import BinlogCopier, CopyError, copy_dump, truncate_copy
from .fsync import FsyncMode, FsyncPolicy
from .gtids import GtidLayout, MysqlGtids
from .layout import file_name, file_number
from .mariadb_gtids import MariadbGtids
from .readable import ReadableFiles, archived_names, find_file
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
    "ReadableFiles",
    "RecoveryReport",
    "TailScan",
    "TxnPosition",
    "file_name",
    "file_number",
    "gtids",
    "mariadb_gtids",
    "archived_names",
    "find_file",
    "key_from_mark",
    "last_written_key",
    "layout",
    "locate",
    "mark_event_ending_at",
    "readable",
    "resume_file",
    "scan",
    "scan_file",
    "truncate_copy",
]
