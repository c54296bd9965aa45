"""A new multi-stream leader fetches, per stream, the tail its copy lacks from the live follower
further ahead in that stream (`dumper/ha/stream_tail.py`, docs/streams.md "Who takes over"),
without processes: dumper 3's stream copies are served read-only by a dump server per stream
port (as its `StreamCopyServers` serve them), the members are the fake GMS's (the real run is
tests/e2e/test_streams_tail.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from binlog_writer import BinlogWriter, FsyncPolicy, truncate_copy
from cdc.binlog.events import XidEvent, cts_mark
from cdc.binlog.query import QueryEvent
from cdc.config import DumperPeer
from cdc.streams import stream_dir
from cdc_equipment.local_cluster.testing import free_base_port
from dumper.ha import HaNode
from dumper.ha.copies import end_of
from dumper.ha.stream_tail import sources, stream_port_address
from tests.chaos.dumpers import copies_identical
from tests.dumper.ha.fakes import FakeCopy, FakeGms, FakeLeaders, FakeLeaseStore
from tests.dumper.helpers import PASSWORD, USER, ServerThread
from tests.dumper.pipeline.fakes import config
from topology import Member

STREAMS = 2


def history(directory: Path, transactions: int, first: int = 1) -> list[tuple[str, int]]:
    """A stream's files (several: 4 KB each), its writer left open as a leader's is; returns
    where each transaction ends."""
    writer = BinlogWriter(directory, max_file_size=4096, fsync=FsyncPolicy.never(), server_id=7)
    ends = []
    for i in range(first, first + transactions):
        writer.append_transaction(
            [QueryEvent(b"BEGIN"), QueryEvent(b"x" * 300), XidEvent(i), cts_mark(i)]
        )
        ends.append((writer.file, writer.position))
    writer.flush()
    return ends


def setup(tmp_path: Path):
    """Dumper 2 (about to lead) and dumper 3 (a follower whose copies go further), of a group
    of three; dumper 3's copies served on its stream ports."""
    base = free_base_port(3 * (STREAMS + 1))
    cfg = config(tmp_path / "unused")
    cfg.dumper.streams = STREAMS
    cfg.dumper.peer_user, cfg.dumper.peer_password = USER, PASSWORD
    cfg.dumper.lease_ms = 2000
    cfg.dumper.peers = [
        DumperPeer(i, port=base + (i - 1) * (STREAMS + 1), binlog_dir=str(tmp_path / f"d{i}"))
        for i in (1, 2, 3)
    ]
    return cfg.for_dumper(2), cfg.for_dumper(3)


async def lead_after(d2, d3, gms: FakeGms, ends) -> HaNode:
    """Dumper 3 reports its copies' `ends`; dumper 2 fetches what it lacks."""
    member = Member(3, f"127.0.0.1:{d3.dumper.port}", "follower", 1, "", 0, 0.0, tuple(ends))
    await FakeLeaseStore(gms, 3).report(member)
    node = HaNode(d2, FakeLeaseStore(gms, 2), FakeLeaders(d2), copy=FakeCopy())
    with (
        ServerThread(stream_dir(d3.dumper, 0), d3.dumper.port + 1),
        ServerThread(stream_dir(d3.dumper, 1), d3.dumper.port + 2),
    ):
        await node.leadership.catch_up_streams()
    return node


async def test_the_new_leader_takes_each_streams_tail_from_the_follower_ahead_in_it(tmp_path):
    """Dumper 2's copy of stream 0 ends at a file's ROTATE, its copy of stream 1 in the middle
    of an earlier file: each is brought up to dumper 3's, byte for byte (files, index)."""
    d2, d3 = setup(tmp_path)
    ends = []
    for i in range(STREAMS):
        mine, theirs = stream_dir(d2.dumper, i), stream_dir(d3.dumper, i)
        txn_ends = history(theirs, 30 + 5 * i)
        ends.append(txn_ends[-1])
        shutil.copytree(theirs, mine)
        if i == 0:  # after binlog.000001's ROTATE: the next file is fetched whole
            truncate_copy(mine, "binlog", "binlog.000002", 4)
        else:  # mid-file, two files back
            truncate_copy(mine, "binlog", *txn_ends[3])
        assert not copies_identical(mine, theirs)
    node = await lead_after(d2, d3, FakeGms(), ends)
    for i in range(STREAMS):
        assert copies_identical(stream_dir(d2.dumper, i), stream_dir(d3.dumper, i))
        assert end_of(node.copies[i], "binlog") == ends[i]


async def test_a_copy_that_does_not_continue_this_one_is_not_taken(tmp_path, caplog):
    """Dumper 3's stream 1 is another history (other transactions, of the same sizes, at the
    same positions): dumper 2's copy of it is left as it was; stream 0 is still fetched."""
    d2, d3 = setup(tmp_path)
    ends = []
    for i in range(STREAMS):
        mine, theirs = stream_dir(d2.dumper, i), stream_dir(d3.dumper, i)
        ends.append(history(theirs, 20, first=100)[-1])
        if i == 0:
            shutil.copytree(theirs, mine)
            truncate_copy(mine, "binlog", "binlog.000001", 4)
        else:
            history(mine, 10, first=500)
    before = (stream_dir(d2.dumper, 1) / "binlog.000002").read_bytes()
    node = await lead_after(d2, d3, FakeGms(), ends)
    assert copies_identical(stream_dir(d2.dumper, 0), stream_dir(d3.dumper, 0))
    assert (stream_dir(d2.dumper, 1) / "binlog.000002").read_bytes() == before
    assert not (stream_dir(d2.dumper, 1) / "binlog.000004").exists()
    assert end_of(node.copies[1], "binlog") != ends[1]
    assert "stream 1's tail not taken from dumper 3" in caplog.text
    assert "differs from this copy" in caplog.text


def test_only_live_followers_at_or_past_this_copy_are_asked_furthest_first():
    def member(i, role, age, end):
        return Member(i, f"h:{i}", role, 1, "", 0, age, (("binlog.000002", 100), end))

    members = [
        member(1, "leader", 0.1, ("binlog.000009", 4)),  # (a leader serves no copy)
        member(3, "follower", 0.1, ("binlog.000003", 50)),
        member(4, "follower", 9.0, ("binlog.000009", 4)),  # not heard from within the lease
        member(5, "follower", 0.1, ("binlog.000003", 900)),
        member(6, "follower", 0.1, ("binlog.000003", 10)),  # behind this copy
        member(7, "follower", 0.1, ("binlog.000003", 50)),
        member(2, "follower", 0.1, ("binlog.000009", 4)),  # this dumper
    ]
    found = sources(members, 2, 1, ("binlog.000003", 50), lease_s=2.0)
    assert [m.dumper_id for m in found] == [5, 3, 7]
    assert stream_port_address("10.0.0.1:3307", 1) == "10.0.0.1:3309"
