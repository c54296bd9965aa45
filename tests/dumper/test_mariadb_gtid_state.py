"""`MariadbGtidState`: @@gtid_binlog_pos / @@gtid_binlog_state from the files, and where a
MariaDB replica's GTID dump (`@slave_connect_state`) starts, with MariaDB's texts for a
position that is not in the binlog, diverged, purged, malformed or a hole in strict mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from binlog_writer.mariadb_gtids import MariadbGtids
from cdc.binlog.constants import EventType, GtidListFlag
from cdc.binlog.events import DomainGtid, GtidListEvent
from cdc.binlog.header import OFF_TYPE
from dumper.server.dump import mariadb_start
from dumper.server.dump.binlog_sender import BinlogSender
from dumper.server.dump.mariadb_start import dump_start
from dumper.server.dump.request import DumpError, DumpOptions, DumpRequest
from dumper.server.store.binlog_files import START, BinlogFiles
from dumper.server.store.mariadb_gtid_state import MariadbGtidState
from tests.binlog_writer.test_mariadb_gtids import (
    DOMAIN,
    PLACEHOLDER,
    SERVER,
    _with_server_id,
    txn,
    writer,
)
from tests.dumper.helpers import Packets


@pytest.fixture
def files(tmp_path: Path) -> BinlogFiles:
    w = writer(tmp_path, max_file_size=1000)
    for i in range(12):
        w.append_encoded(bytearray(txn(i)))
    w.close()
    return BinlogFiles(tmp_path)


def seq_at(files: BinlogFiles, name: str, pos: int) -> int:
    return int.from_bytes(files.path(name).read_bytes()[pos + 19 : pos + 27], "little")


def test_variables_and_starts(files: BinlogFiles):
    state = MariadbGtidState(files, DOMAIN, SERVER)
    assert state.variables() == {
        "gtid_binlog_pos": "7-100-12",
        "gtid_current_pos": "7-100-12",
        "gtid_binlog_state": "7-100-12",
    }
    names = files.names()
    assert len(names) > 3
    assert dump_start(state, "") == (names[0], START)  # a new replica: the very beginning
    assert dump_start(state, "0-1-5") == (names[0], START)  # other domains are not ours
    layout = MariadbGtids(DOMAIN, SERVER)
    for k in range(1, 12):
        name, pos = dump_start(state, f"0-1-99,{DOMAIN}-{SERVER}-{k}")
        if pos == START:  # k is the last GTID before that file
            assert layout.head(files.path(name)).gtid_list[-1].seq_no == k
        else:
            assert seq_at(files, name, pos) == k + 1
    last = names[-1]
    assert dump_start(state, f"{DOMAIN}-{SERVER}-12") == (last, files.complete_end(last))


def test_variables_as_of_a_pinned_position(files: BinlogFiles):
    """Inside a snapshot transaction pinned at P the GTIDs are P's: where a replica at GTID k
    starts its dump, `@@gtid_binlog_pos` as of there is k (so mariadb-dump --gtid prints the
    GTID its data is at)."""
    state = MariadbGtidState(files, DOMAIN, SERVER)
    for k in range(1, 12):
        name, pos = dump_start(state, f"{DOMAIN}-{SERVER}-{k}")
        got = state.variables((name, pos))
        assert got["gtid_binlog_pos"] == got["gtid_current_pos"] == f"{DOMAIN}-{SERVER}-{k}"
    assert state.variables((files.names()[0], START))["gtid_binlog_pos"] in (
        "",
        f"{DOMAIN}-{SERVER}-0",
    )


def test_positions_we_cannot_serve_are_refused_with_mariadbs_texts(files: BinlogFiles):
    state = MariadbGtidState(files, DOMAIN, SERVER)
    with pytest.raises(DumpError) as err:
        dump_start(state, f"{DOMAIN}-{SERVER}-13")
    assert err.value.code == 1236 and err.value.message == (
        f"Error: connecting slave requested to start from GTID {DOMAIN}-{SERVER}-13, which is "
        "not in the master's binlog"
    )
    with pytest.raises(DumpError, match="the slave has diverged due to executing extra"):
        dump_start(state, f"{DOMAIN}-999-5")  # another server_id: not ours
    with pytest.raises(DumpError, match="malformed slave request") as err:
        dump_start(state, "7-100")
    assert err.value.code == 1105
    # A multi-path replica (gtid_ignore_duplicates) ahead of us waits at the end.
    last = files.names()[-1]
    assert dump_start(state, f"{DOMAIN}-{SERVER}-20", ignore_duplicates=True) == (
        last,
        files.complete_end(last),
    )
    files.purge(files.victims_to(files.names()[2]))
    with pytest.raises(DumpError, match="Probably the slave state is too old and required binlog"):
        dump_start(state, f"{DOMAIN}-{SERVER}-1")
    with pytest.raises(DumpError, match="required binlog files have been purged"):
        dump_start(state, "")  # the domain's beginning is gone
    first = MariadbGtids(DOMAIN, SERVER).head(files.path(files.names()[0])).gtid_list[-1]
    assert dump_start(state, f"{DOMAIN}-{SERVER}-{first.seq_no}") == (files.names()[0], START)


def test_strict_mode_refuses_a_gtid_of_another_server_at_that_seq_no(tmp_path: Path):
    w = writer(tmp_path)
    w.append_encoded(bytearray(txn(0)))
    w.close()
    w = writer(tmp_path, server_id=200)  # 7-200-2 …
    for i in range(1, 3):
        w.append_encoded(bytearray(txn(i).replace(PLACEHOLDER, _with_server_id(200))))
    w.close()
    state = MariadbGtidState(BinlogFiles(tmp_path), DOMAIN, SERVER)
    assert state.variables()["gtid_binlog_state"] == "7-100-1,7-200-3"
    # 7-200-2 exists; a replica at 7-200-2 continues with 3.
    name, pos = dump_start(state, f"{DOMAIN}-200-2", strict=True)
    assert seq_at(BinlogFiles(tmp_path), name, pos) == 3
    # 7-200-1 never existed (seq_no 1 is server 100's) though 200 has later ones: a hole in
    # strict mode; otherwise served from seq_no 2.
    with pytest.raises(DumpError, match="missing the GTID 7-200-1 requested by the slave"):
        dump_start(state, f"{DOMAIN}-200-1", strict=True)
    name, pos = dump_start(state, f"{DOMAIN}-200-1")
    assert seq_at(BinlogFiles(tmp_path), name, pos) == 2


def until_dump(files: BinlogFiles, connect: str, until: str, batch_bytes: int) -> list[bytes]:
    """The events a dump from `connect` with `@slave_until_gtid = until` sends."""
    state = MariadbGtidState(files, DOMAIN, SERVER)
    name, pos = dump_start(state, connect)
    sink = Packets()
    sender = BinlogSender(files, sink, server_id=SERVER, batch_bytes=batch_bytes)
    request = DumpRequest(name, pos, server_id=5, until=mariadb_start.until(state, connect, until))
    # Blocking: only the until position may end it.
    asyncio.run(asyncio.wait_for(sender.run(request, DumpOptions(checksum=True)), 10))
    return sink.events


def seqs(events: list[bytes]) -> list[int]:
    return [
        int.from_bytes(ev[19:27], "little")
        for ev in events
        if ev[OFF_TYPE] == EventType.MARIADB_GTID
    ]


@pytest.mark.parametrize("batch_bytes", [50, 256 * 1024])
def test_start_slave_until_ends_the_dump_after_that_transaction(
    files: BinlogFiles, batch_bytes: int
):
    """MariaDB's master sends up to and including the until GTID, then a fake GTID_LIST
    flagged UNTIL_REACHED, and ends the dump: the replica relies on it to stop."""
    for connect, until, want in [
        ("", f"{DOMAIN}-{SERVER}-5", [1, 2, 3, 4, 5]),
        (f"{DOMAIN}-{SERVER}-3", f"{DOMAIN}-{SERVER}-7", [4, 5, 6, 7]),
        (f"{DOMAIN}-{SERVER}-3", f"{DOMAIN}-{SERVER}-12", list(range(4, 13))),
        (f"{DOMAIN}-{SERVER}-3", f"0-1-9,{DOMAIN}-{SERVER}-4", [4]),
        (f"{DOMAIN}-{SERVER}-6", f"{DOMAIN}-{SERVER}-6", []),  # reached already
        (f"{DOMAIN}-{SERVER}-6", f"{DOMAIN}-{SERVER}-2", []),
        (f"{DOMAIN}-{SERVER}-6", "0-1-9", []),  # names none of ours: nothing can reach it
    ]:
        events = until_dump(files, connect, until, batch_bytes)
        assert seqs(events) == want, (connect, until)
        last = events[-1]
        assert last[OFF_TYPE] == EventType.GTID_LIST, (connect, until)
        body = GtidListEvent.parse(last[19:-4], None)
        assert body.flags == GtidListFlag.UNTIL_REACHED
        if want:  # the whole last transaction went, its CTS mark too
            assert events[-2][OFF_TYPE] == EventType.BINLOG_CHECKPOINT
            assert body.gtids == (DomainGtid(DOMAIN, SERVER, want[-1]),)
    with pytest.raises(DumpError, match="malformed slave request when obtaining UNTIL") as err:
        mariadb_start.until(MariadbGtidState(files, DOMAIN, SERVER), "", "7-100")
    assert err.value.code == 1105


def test_until_waits_for_a_transaction_not_written_yet(tmp_path: Path):
    """The until GTID may be in the future: the dump follows until it is written, whole."""
    w = writer(tmp_path, max_file_size=1000)
    for i in range(3):
        w.append_encoded(bytearray(txn(i)))
    files = BinlogFiles(tmp_path)
    state = MariadbGtidState(files, DOMAIN, SERVER)
    name, pos = dump_start(state, "")
    sink = Packets()
    sender = BinlogSender(files, sink, server_id=SERVER, poll_interval=0.01)
    request = DumpRequest(
        name, pos, server_id=5, until=mariadb_start.until(state, "", f"{DOMAIN}-{SERVER}-6")
    )

    async def run() -> None:
        task = asyncio.create_task(sender.run(request, DumpOptions(checksum=True)))
        for i in range(3, 9):  # seq_no i + 1
            await asyncio.sleep(0.05)
            assert task.done() == (i > 5), i
            w.append_encoded(bytearray(txn(i)))
        await asyncio.wait_for(task, 5)

    asyncio.run(run())
    w.close()
    assert seqs(sink.events) == [1, 2, 3, 4, 5, 6]
    assert sink.events[-1][OFF_TYPE] == EventType.GTID_LIST
