"""binlog_writer: append-only writer of MySQL binlog files (binlog.NNNNNN + binlog.index),
with rotation, fsync policy and crash recovery of a partial tail."""
