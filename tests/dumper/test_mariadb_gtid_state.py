"""`MariadbGtidState`: @@gtid_binlog_pos / @@gtid_binlog_state from the files, and where a
MariaDB replica's GTID dump (`@slave_connect_state`) starts, with MariaDB's texts for a
position that is not in the binlog, diverged, purged, malformed or a hole in strict mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog_writer.mariadb_gtids import MariadbGtids
from dumper.server.binlog_files import START, BinlogFiles
from dumper.server.binlog_sender import DumpError
from dumper.server.mariadb_gtid_state import MariadbGtidState
from tests.binlog_writer.test_mariadb_gtids import (
    DOMAIN,
    PLACEHOLDER,
    SERVER,
    _with_server_id,
    txn,
    writer,
)


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
    assert state.dump_start("") == (names[0], START)  # a new replica: the very beginning
    assert state.dump_start("0-1-5") == (names[0], START)  # other domains are not ours
    layout = MariadbGtids(DOMAIN, SERVER)
    for k in range(1, 12):
        name, pos = state.dump_start(f"0-1-99,{DOMAIN}-{SERVER}-{k}")
        if pos == START:  # k is the last GTID before that file
            assert layout.head(files.path(name)).gtid_list[-1].seq_no == k
        else:
            assert seq_at(files, name, pos) == k + 1
    last = names[-1]
    assert state.dump_start(f"{DOMAIN}-{SERVER}-12") == (last, files.complete_end(last))


def test_positions_we_cannot_serve_are_refused_with_mariadbs_texts(files: BinlogFiles):
    state = MariadbGtidState(files, DOMAIN, SERVER)
    with pytest.raises(DumpError) as err:
        state.dump_start(f"{DOMAIN}-{SERVER}-13")
    assert err.value.code == 1236 and err.value.message == (
        f"Error: connecting slave requested to start from GTID {DOMAIN}-{SERVER}-13, which is "
        "not in the master's binlog"
    )
    with pytest.raises(DumpError, match="the slave has diverged due to executing extra"):
        state.dump_start(f"{DOMAIN}-999-5")  # another server_id: not ours
    with pytest.raises(DumpError, match="malformed slave request") as err:
        state.dump_start("7-100")
    assert err.value.code == 1105
    # A multi-path replica (gtid_ignore_duplicates) ahead of us waits at the end.
    last = files.names()[-1]
    assert state.dump_start(f"{DOMAIN}-{SERVER}-20", ignore_duplicates=True) == (
        last,
        files.complete_end(last),
    )
    files.purge_to(files.names()[2])
    with pytest.raises(DumpError, match="Probably the slave state is too old and required binlog"):
        state.dump_start(f"{DOMAIN}-{SERVER}-1")
    with pytest.raises(DumpError, match="required binlog files have been purged"):
        state.dump_start("")  # the domain's beginning is gone
    first = MariadbGtids(DOMAIN, SERVER).head(files.path(files.names()[0])).gtid_list[-1]
    assert state.dump_start(f"{DOMAIN}-{SERVER}-{first.seq_no}") == (files.names()[0], START)


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
    name, pos = state.dump_start(f"{DOMAIN}-200-2", strict=True)
    assert seq_at(BinlogFiles(tmp_path), name, pos) == 3
    # 7-200-1 never existed (seq_no 1 is server 100's) though 200 has later ones: a hole in
    # strict mode; otherwise served from seq_no 2.
    with pytest.raises(DumpError, match="missing the GTID 7-200-1 requested by the slave"):
        state.dump_start(f"{DOMAIN}-200-1", strict=True)
    name, pos = state.dump_start(f"{DOMAIN}-200-1")
    assert seq_at(BinlogFiles(tmp_path), name, pos) == 2
