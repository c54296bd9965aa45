"""`GtidState`: gtid_executed / gtid_purged from the files, and where a GTID dump starts,
with MySQL's 1236 texts for a set that needs purged files or holds unknown transactions."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, gtids
from binlog_writer.gtids import MysqlGtids
from cdc.binlog.gtid import GtidSet
from dumper.server.binlog_files import BinlogFiles
from dumper.server.binlog_sender import DumpError
from dumper.server.gtid_state import GtidState, parse_dump_gtid
from tests.binlog_writer.test_gtids import SID, txn

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.fixture
def files(tmp_path: Path) -> BinlogFiles:
    w = BinlogWriter(tmp_path, max_file_size=1200, gtids=MysqlGtids(SID))
    for i in range(12):
        w.append_encoded(bytearray(txn(i)))
    w.close()
    return BinlogFiles(tmp_path)


def test_sets_and_starts(files: BinlogFiles):
    state = GtidState(files, UUID)
    assert str(state.executed()) == f"{UUID}:1-12" and not state.purged()
    names = files.names()
    assert len(names) > 3
    for k in range(12):
        name, pos = state.dump_start(GtidSet.parse(f"{UUID}:1-{k}" if k else ""))
        assert gtids.gno_at(files.path(name).read_bytes(), pos) == k + 1
    # Up to date: the end of the newest file.
    last = names[-1]
    assert state.dump_start(state.executed()) == (last, files.complete_end(last))


def test_purged_and_unknown_transactions_are_refused(files: BinlogFiles):
    state = GtidState(files, UUID)
    with pytest.raises(DumpError, match="Replica has more GTIDs than the source has") as err:
        state.dump_start(GtidSet.parse(f"{UUID}:1-13"))
    assert err.value.code == 1236
    files.purge_to(files.names()[2])
    before = gtids.file_previous_gtids(files.path(files.names()[0]))
    assert state.purged() == before and before.last(SID) > 1
    with pytest.raises(DumpError, match="source purged required binary logs") as err:
        state.dump_start(GtidSet.parse(f"{UUID}:1"))
    assert f"the missing transactions are '{UUID}:2-{before.last(SID)}'" in err.value.message
    name, pos = state.dump_start(before)  # exactly what was purged: fine
    assert gtids.gno_at(files.path(name).read_bytes(), pos) == before.last(SID) + 1


def test_dump_gtid_packets():
    encoded = GtidSet.parse(f"{UUID}:1-5").encode()
    body = struct.pack("<HII", 4, 77, 0) + struct.pack("<Q", 4)
    body += struct.pack("<I", len(encoded)) + encoded
    request, got = parse_dump_gtid(body)
    assert (request.server_id, request.flags, str(got)) == (77, 4, f"{UUID}:1-5")
    for bad in (body[:5], body[:-3], body[:22] + b"\xff" * 8):
        with pytest.raises(DumpError, match="malformed COM_BINLOG_DUMP_GTID"):
            parse_dump_gtid(bad)
