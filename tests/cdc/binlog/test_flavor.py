"""The MariaDB flavour adapter: what the dump handshake sends, the XA id of a GTID event, and
that DumpSettings keep the one instance across a pickle (MergeSource processes)."""

from __future__ import annotations

import pickle
import struct

from cdc.binlog.constants import EventType
from cdc.binlog.flavor import FL_GROUP_COMMIT_ID, FL_PREPARED_XA, GTID_FLAGS2_OFFSET, MARIADB
from cdc.protocol import DumpSettings


def test_the_dump_handshake_asks_for_xa_gtid_events():
    statements = MARIADB.dump_session_statements(1.5)
    assert "SET @mariadb_slave_capability=4" in statements
    assert "SET @master_heartbeat_period=1500000000" in statements
    assert MARIADB.dump_flags == 0x02  # BINLOG_SEND_ANNOTATE_ROWS_EVENT


def test_gtid_xid_reads_the_xid_after_the_flags():
    for flags2 in (FL_PREPARED_XA, FL_PREPARED_XA | FL_GROUP_COMMIT_ID):
        head = bytearray(GTID_FLAGS2_OFFSET) + bytes([flags2])
        head[4] = EventType.MARIADB_GTID
        if flags2 & FL_GROUP_COMMIT_ID:
            head += bytes(8)
        gtid = bytes(head) + struct.pack("<iBB", 1, 6, 1) + b"cdc-42" + b"3" + bytes(4)
        assert MARIADB.gtid_flags2(gtid) == flags2
        assert MARIADB.gtid_xid(gtid) == (1, b"cdc-42", b"3")


def test_dump_settings_keep_the_flavour_across_a_pickle():
    settings = DumpSettings("h", 1, "u", "p", server_id=5)
    assert pickle.loads(pickle.dumps(settings)).flavor is MARIADB
