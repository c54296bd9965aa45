"""`GtidState`: gtid_executed / gtid_purged from the files, and where a GTID dump starts,
with MySQL's 1236 texts for a set that needs purged files or holds unknown transactions."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from binlog_writer import BinlogWriter, gtids
from binlog_writer.gtids import MysqlGtids
from cdc.binlog.constants import EventType
from cdc.binlog.gtid import GtidSet
from cdc.binlog.header import OFF_TYPE
from dumper.server.dump.binlog_sender import BinlogSender
from dumper.server.dump.gtid_start import dump_start, parse_dump_gtid
from dumper.server.dump.request import DumpError, DumpOptions, DumpRequest
from dumper.server.store.binlog_files import BinlogFiles
from dumper.server.store.gtid_state import GtidState
from tests.binlog_writer.test_gtids import SID, txn
from tests.dumper.helpers import Packets

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
        name, pos, exclude = dump_start(state, GtidSet.parse(f"{UUID}:1-{k}" if k else ""))
        assert exclude is None
        assert gtids.gno_at(files.path(name).read_bytes(), pos) == k + 1
    # Up to date: the end of the newest file.
    last = names[-1]
    assert dump_start(state, state.executed()) == (last, files.complete_end(last), None)


def test_purged_and_unknown_transactions_are_refused(files: BinlogFiles):
    state = GtidState(files, UUID)
    with pytest.raises(DumpError, match="Replica has more GTIDs than the source has") as err:
        dump_start(state, GtidSet.parse(f"{UUID}:1-13"))
    assert err.value.code == 1236
    files.purge(files.victims_to(files.names()[2]))
    before = gtids.file_previous_gtids(files.path(files.names()[0]))
    assert state.purged() == before and before.last(SID) > 1
    with pytest.raises(DumpError, match="source purged required binary logs") as err:
        dump_start(state, GtidSet.parse(f"{UUID}:1"))
    assert f"the missing transactions are '{UUID}:2-{before.last(SID)}'" in err.value.message
    name, pos, _ = dump_start(state, before)  # exactly what was purged: fine
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


FILE_EVENTS = {EventType.ROTATE, EventType.FORMAT_DESCRIPTION, EventType.PREVIOUS_GTIDS}


def dumped(files: BinlogFiles, client: str, batch_bytes: int) -> dict[int, list[bytes]]:
    """What a non-blocking GTID dump from `client` sends: per GTID the events from it to the
    next (the files' ROTATE, FDE and PREVIOUS_GTIDS events left out), in order."""
    name, pos, exclude = dump_start(GtidState(files, UUID), GtidSet.parse(client))
    sink = Packets()
    sender = BinlogSender(files, sink, server_id=1, batch_bytes=batch_bytes)
    request = DumpRequest(name, pos, flags=1, server_id=5, exclude=exclude)
    asyncio.run(sender.run(request, DumpOptions(checksum=True)))
    out: dict[int, list[bytes]] = {}
    for ev in sink.events:
        if ev[OFF_TYPE] == EventType.GTID:
            group = out.setdefault(gtids.gno_at(ev, 0), [])
        if ev[OFF_TYPE] not in FILE_EVENTS:
            group.append(ev)
    return out


@pytest.mark.parametrize("batch_bytes", [64, 300, 256 * 1024])
def test_a_set_with_gaps_gets_only_what_it_lacks(files: BinlogFiles, batch_bytes: int):
    """MySQL's dump thread skips the transactions a client holds after its first gap; the
    events of a skipped transaction go with it (ROTATE stays: the client follows files by it).
    Batches smaller than an event take the one-event path."""
    everything = dumped(files, "", batch_bytes)
    assert list(everything) == list(range(1, 13))
    for client, want in [
        (f"{UUID}:1-3:5-7:10", [4, 8, 9, 11, 12]),
        (f"{UUID}:2-12", [1]),
        (f"{UUID}:1-11", [12]),
        (f"{UUID}:1-5:7-12", [6]),
        (f"{UUID}:1:3:5:7:9:11", [2, 4, 6, 8, 10, 12]),
    ]:
        assert dumped(files, client, batch_bytes) == {g: everything[g] for g in want}, client


def test_the_missing_purged_transactions_are_named(files: BinlogFiles):
    state = GtidState(files, UUID)
    files.purge(files.victims_to(files.names()[2]))
    purged = state.purged().last(SID)
    with pytest.raises(DumpError) as err:
        dump_start(state, GtidSet.parse(f"{UUID}:1-{purged - 2}:{purged}"))
    assert f"the missing transactions are '{UUID}:{purged - 1}'" in err.value.message
