"""What is particular to the DN's server flavour: today MariaDB (10.11), the only one we read.

The rest of the codec follows the v4 binlog format every server shares. A MariaDB binlog adds:
- a GTID event (162) before every transaction, whose flags2 byte says whether the group is
  standalone (a DDL, an XA COMMIT/ROLLBACK: its first QUERY ends it), an XA PREPARE (the
  group ends with XA_PREPARE, 38) or a completed XA (XA COMMIT/ROLLBACK, a QUERY); an XA
  group's GTID event carries the xid (formatID, gtrid, bqual);
- events outside any group that carry no data: GTID_LIST (163), BINLOG_CHECKPOINT (161), STOP;
- ANNOTATE_ROWS (160): the statement before its row events, sent only to a dump that asks
  for it (the dump flag below), which is where the CN's TraceId hint is read;
- rows events v1 (23-25), which the global binlog turns into MySQL's v2 (30-32);
- TABLE_MAP charset metadata that counts GEOMETRY columns among the character columns.
And its dump handshake: `@mariadb_slave_capability`, without which MariaDB aborts a dump at an
XA GTID event, and the ANNOTATE_ROWS dump flag.

`MariadbFlavor` holds the operations callers need; a MySQL 8 flavour would sit beside it with
the same names (its GTID event, XA_PREPARE_LOG_EVENT, no ANNOTATE_ROWS, ...). The per-event
loops compiled by Cython read the same numbers as C constants (`constants.pxd`).
"""

from __future__ import annotations

import struct

from cdc.binlog.constants import (
    ANNOTATE_ROWS_EVENT,
    BINLOG_CHECKPOINT_EVENT,
    GTID_LIST_EVENT,
    MARIADB_GTID_EVENT,
    STOP_EVENT,
    MariadbGtidFlag,
)
from cdc.binlog.mariadb_gtid import MARIADB_GTID_FLAGS2_OFFSET
from cdc.protocol.constants import BINLOG_SEND_ANNOTATE_ROWS_EVENT

# A raw GTID event: the header, seq_no u64, domain_id u32, then flags2 u8.
GTID_FLAGS2_OFFSET = MARIADB_GTID_FLAGS2_OFFSET
FL_STANDALONE = int(MariadbGtidFlag.STANDALONE)
FL_GROUP_COMMIT_ID = int(MariadbGtidFlag.GROUP_COMMIT_ID)
FL_PREPARED_XA = int(MariadbGtidFlag.PREPARED_XA)
FL_COMPLETED_XA = int(MariadbGtidFlag.COMPLETED_XA)
# What a dump client must say before COM_BINLOG_DUMP: 4 = MARIA_SLAVE_CAPABILITY_GTID.
SLAVE_CAPABILITY = 4
_XID_HEAD = struct.Struct("<iBB")  # formatID, gtrid length, bqual length


class MariadbFlavor:
    """The MariaDB dialect of the binlog and of the dump handshake."""

    name = "mariadb"
    gtid_event = MARIADB_GTID_EVENT
    annotate_rows_event = ANNOTATE_ROWS_EVENT
    # Between groups, carrying no data: skipped by whoever cuts the stream into groups.
    non_data_events = frozenset({GTID_LIST_EVENT, BINLOG_CHECKPOINT_EVENT, STOP_EVENT})
    # COM_BINLOG_DUMP flags: ANNOTATE_ROWS carries the statement (and the CN's TraceId hint).
    dump_flags = BINLOG_SEND_ANNOTATE_ROWS_EVENT
    # Its TABLE_MAP charset TLVs count GEOMETRY columns (`TableMapEvent.columns(mariadb=...)`).
    geometry_has_charset = True

    def dump_session_statements(self, heartbeat_period_s: float) -> list[str]:
        """What a dump client runs before COM_BINLOG_DUMP: the GTID capability (XA GTID
        events), the checksum the server uses (events arrive with it) and the heartbeat
        period (ns) that keeps an idle dump alive."""
        return [
            f"SET @mariadb_slave_capability={SLAVE_CAPABILITY}",
            "SET @master_binlog_checksum=@@global.binlog_checksum",
            f"SET @master_heartbeat_period={int(heartbeat_period_s * 1e9)}",
        ]

    @staticmethod
    def gtid_flags2(gtid: bytes) -> int:
        return gtid[GTID_FLAGS2_OFFSET]

    @staticmethod
    def gtid_xid(gtid: bytes) -> tuple[int, bytes, bytes]:
        """(formatID, gtrid, bqual) carried by an XA GTID event (PREPARED_XA or COMPLETED_XA)."""
        pos = GTID_FLAGS2_OFFSET + 1
        if gtid[GTID_FLAGS2_OFFSET] & FL_GROUP_COMMIT_ID:
            pos += 8
        fmt, glen, blen = _XID_HEAD.unpack_from(gtid, pos)
        pos += _XID_HEAD.size
        return fmt, bytes(gtid[pos : pos + glen]), bytes(gtid[pos + glen : pos + glen + blen])

    def __reduce__(self) -> str:
        """Pickled by name (DumpSettings cross to MergeSource processes): one instance."""
        return "MARIADB"

    def table_map_columns(self, table_map) -> list:
        """The columns of a decoded TABLE_MAP written by this flavour."""
        return table_map.columns(mariadb=self.geometry_has_charset)


MARIADB = MariadbFlavor()
