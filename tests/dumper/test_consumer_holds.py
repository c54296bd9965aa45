"""History kept for whom needs it (issue 42, item 5): a named (or registered) consumer holds the
files it has not read while it is away, up to caps in bytes and time; past a cap its hold is
dropped loudly (log, report, counter); purged files can go to an archive that dumps (file:pos
and GTID) still read. The rule on its own, then a real server with real clients and the files
of a real BinlogWriter."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import struct
import time

import pymysql
import pytest

from binlog_writer import BinlogWriter, file_number
from binlog_writer.gtids import MysqlGtids
from cdc.config import Config, ConfigError, DumperConfig, DumperConsumer, from_dict
from cdc.protocol.dump_client import BinlogPosition, DumpClient, DumpSettings
from dumper.server.store.binlog_files import BinlogFile, BinlogFiles, check_archive
from dumper.server.store.consumer_holds import (
    HOLDS_FILE,
    ConsumerHold,
    ConsumerHolds,
    Seen,
    lag_bytes,
    over_cap,
)
from tests.binlog_writer.test_gtids import SID, txn
from tests.dumper.helpers import PASSWORD, USER, ServerThread, wait_for
from tests.dumper.test_gtid_state import UUID, dumped
from tests.dumper.test_retention import BIG, FILES, dump, names, write_files

NOW = 1_000_000.0


# -- the rule ---------------------------------------------------------------------------------
def test_lag_and_caps():
    files = [BinlogFile("binlog.000001", 100), BinlogFile("binlog.000002", 50)]
    assert lag_bytes(files, "binlog.000001", 40) == 110
    assert lag_bytes(files, "binlog.000002", 50) == 0
    assert lag_bytes(files, "binlog.000000", 4) is None  # gone
    hold = ConsumerHold("c", max_hold_bytes=100, max_hold_s=60, seen_at=NOW)
    assert over_cap(hold, 100, NOW) == ""
    assert "max_hold_bytes 100" in over_cap(hold, 101, NOW)
    hold.behind_since = NOW - 61
    assert "max_hold_s 60" in over_cap(hold, 1, NOW)
    assert over_cap(hold, 0, NOW) == ""  # caught up: not behind at all


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def holds_of(tmp_path, seen: list[Seen], clock: Clock, **config) -> ConsumerHolds:
    config.setdefault("consumers", [DumperConsumer("app", server_id=4242, max_hold_s=600)])
    return ConsumerHolds(BinlogFiles(tmp_path), DumperConfig(**config), lambda: seen, clock)


def test_a_consumer_away_holds_its_file_across_a_restart_until_its_time_cap(tmp_path, caplog):
    writer = write_files(tmp_path)
    all_files = names(tmp_path)
    clock, seen = Clock(), [Seen(4242, "", all_files[1], 4, 0.0)]
    holds = holds_of(tmp_path, seen, clock)
    assert [h.file for h in holds.holders()] == [all_files[1]]
    seen.clear()  # it went away
    clock.now += 100
    assert [h.file for h in holds.holders()] == [all_files[1]]
    saved = json.loads((tmp_path / HOLDS_FILE).read_text())["consumers"]
    assert saved[0]["file"] == all_files[1] and saved[0]["configured"]
    # A restart of the dumper: the position is read back.
    again = holds_of(tmp_path, [], clock)
    assert [h.file for h in again.holders()] == [all_files[1]]
    caplog.set_level(logging.WARNING, logger="dumper.server.store.consumer_holds")
    clock.now += 600  # behind since it left, 700 s > 600
    assert again.holders() == [] and again.dropped_total == 1
    (report,) = again.report()
    assert report["dropped"].startswith("behind for 700s") and report["holds"] == ""
    assert any("DROPPED" in r.getMessage() and "app" in r.getMessage() for r in caplog.records)
    # Reading again within its caps: it holds again.
    seen.append(Seen(4242, "", writer.file, 4, 0.0))
    again.seen = lambda: seen
    assert [h.file for h in again.holders()] == [writer.file]
    writer.close()


def test_a_position_learned_from_a_peer_further_on_is_no_drop(tmp_path, caplog):
    """A copy behind the leader learns a consumer position in a file it has not copied yet:
    it holds that file name (nothing before it), drops nothing, says nothing."""
    writer = write_files(tmp_path)
    ahead = f"binlog.{file_number(writer.file) + 1:06d}"
    clock = Clock()
    holds = ConsumerHolds(
        BinlogFiles(tmp_path),
        DumperConfig(consumers=[DumperConsumer("app", server_id=4242)]),
        list,
        clock,
        remote=lambda: [Seen(4242, "", ahead, 4, 0.0)],
    )
    caplog.set_level(logging.WARNING, logger="dumper.server.store.consumer_holds")
    assert [h.file for h in holds.holders()] == [ahead]
    (report,) = holds.report()
    assert report["dropped"] == "" and report["lag_bytes"] == 0 and not report["connected"]
    assert holds.dropped_total == 0 and not caplog.records
    writer.close()


def test_the_byte_cap_and_registration_by_uuid(tmp_path):
    write_files(tmp_path)
    first = names(tmp_path)[0]
    clock = Clock()
    seen = [Seen(7, "A1B2", first, 4, NOW), Seen(9901, "", first, 4, NOW)]
    holds = holds_of(
        tmp_path,
        seen,
        clock,
        consumers=[DumperConsumer("small", server_id=9901, max_hold_bytes=1000)],
        register_consumers=True,
    )
    assert [h.who for h in holds.holders()] == ["consumer uuid:a1b2"]
    by_name = {r["name"]: r for r in holds.report()}
    assert by_name["small"]["dropped"].endswith("> max_hold_bytes 1000")
    assert not by_name["uuid:a1b2"]["configured"] and by_name["uuid:a1b2"]["connected"]
    # Registered consumers are remembered across a restart (with the default caps).
    again = holds_of(tmp_path, [], clock, consumers=[], register_consumers=True)
    assert [h.who for h in again.holders()] == ["consumer uuid:a1b2"]
    # ... and forgotten, loudly, once registration is off.
    assert holds_of(tmp_path, [], clock, consumers=[]).holders() == []


@pytest.mark.parametrize(
    "dumper, message",
    [
        ({"consumers": [{"name": "a", "server_id": 1, "max_hold_bytes": 0}]}, "max_hold_bytes = 0"),
        ({"consumers": [{"name": "a", "server_id": 1, "max_hold_s": -1}]}, "max_hold_s = -1"),
        ({"consumers": [{"name": "a", "server_id": 1, "hold": 1}]}, "unknown key(s) ['hold']"),
        ({"consumers": [{"name": "a"}]}, "set server_id or server_uuid"),
        (
            {"consumers": [{"name": "a", "server_id": 1}, {"name": "a", "server_id": 2}]},
            "named twice",
        ),
        ({"consumer_max_hold_bytes": 0}, "consumer_max_hold_bytes = 0"),
    ],
)
def test_bad_consumer_config_is_an_error_naming_the_key(dumper, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        from_dict(Config, {"dumper": dumper})


def test_an_archive_that_cannot_be_written_is_an_error_at_start(tmp_path):
    (tmp_path / "a-file").write_text("")  # (not a directory: refused even to root)
    bad = tmp_path / "a-file" / "archive"
    with pytest.raises(ConfigError, match="archive_dir = .* not a writable directory"):
        check_archive(bad)
    with pytest.raises(ConfigError, match="archive_dir"):
        ServerThread(tmp_path, archive_dir=str(bad))


# -- the archive ------------------------------------------------------------------------------
def test_purged_files_move_to_the_archive_and_gtid_dumps_reach_into_it(tmp_path):
    live, archive = tmp_path / "binlog", tmp_path / "archive"
    w = BinlogWriter(live, max_file_size=1200, gtids=MysqlGtids(SID))
    for i in range(12):
        w.append_encoded(bytearray(txn(i)))
    w.close()
    files = BinlogFiles(live, archive=check_archive(archive))
    before = {client: dumped(files, client, 300) for client in ("", f"{UUID}:1-2", f"{UUID}:1-7")}
    all_files = files.names()
    gone = files.purge(files.victims_to(all_files[-2]))
    assert gone == all_files[:-2] and files.names() == all_files[-2:]
    assert sorted(p.name for p in archive.iterdir()) == gone
    assert files.readable_names() == all_files
    assert files.locate(gone[0]) == archive / gone[0] and files.locate("binlog.999999") is None
    for client, events in before.items():
        assert dumped(files, client, 300) == events, client


def test_a_gap_in_the_archive_ends_what_is_readable(tmp_path):
    """The operator prunes a file from the middle of the archive: the files before the gap
    are no longer readable (a reader crossing it would skip its transactions), for the
    server's store and the tools' lookup (`binlog_writer.ReadableFiles`) alike; `locate` by
    TSO and GTID then finds what is left, archived or live."""
    from binlog_writer import ReadableFiles, locate

    live, archive = tmp_path / "binlog", tmp_path / "archive"
    w = BinlogWriter(live, max_file_size=1200, gtids=MysqlGtids(SID))
    for i in range(12):
        w.append_encoded(bytearray(txn(i)))
    w.close()
    files = BinlogFiles(live, archive=check_archive(archive))
    all_files = files.names()
    first_gtid = locate.by_gtid_text(live, "binlog", f"{UUID}:1")
    gone = files.purge(files.victims_to(all_files[-1]))
    assert len(gone) >= 3, gone
    tools = ReadableFiles(live, "binlog", archive)
    assert files.readable_names() == tools.names() == all_files
    assert locate.by_gtid_text(live, "binlog", f"{UUID}:1", archive) == first_gtid
    assert locate.by_tso(live, "binlog", first_gtid.tso, archive) == first_gtid
    with pytest.raises(locate.LocateError):
        locate.by_gtid_text(live, "binlog", f"{UUID}:1")  # without the archive: purged
    (archive / gone[1]).unlink()
    assert files.readable_names() == tools.names() == all_files[2:]
    assert files.locate(gone[0]) is not None and files.resolve(gone[0], archived=True) is None
    with pytest.raises(locate.LocateError):
        locate.by_gtid_text(live, "binlog", f"{UUID}:1", archive)


async def read_to_end(
    port: int, start: BinlogPosition, user: str = USER, password: str = PASSWORD
) -> list[bytes]:
    """Every event a non-blocking dump from `start` gets (ROTATEs between files kept)."""
    settings = DumpSettings(
        "127.0.0.1",
        port,
        user,
        password,
        server_id=4242,
        reconnect=False,
        keep_rotate=True,
        non_blocking=True,
    )
    client = DumpClient(settings, start)
    out = []
    try:
        async for batch in client.batches():
            out.extend(ev.data for ev in batch)
    finally:
        await client.close()
    return out


def events_in(files: BinlogFiles, start: BinlogPosition) -> list[bytes]:
    """The events of the files from `start` on, read from disk (what a dump must send, less
    the first file's FDE and preamble, which `read_to_end` does not hand out either)."""
    out = []
    readable = files.readable_names()
    for name in readable[readable.index(start.file) :]:
        first = start.pos if name == start.file else 4
        for ev in files.events(name, 4):
            if ev.pos >= first and ev.type_code != 15:  # FDEs: the client keeps them apart
                out.append(ev.data)
    return out


def wait_holding(s: ServerThread, file: str) -> None:
    wait_for(
        lambda: [c for c in on_loop(s, s.server.consumer_holds)["consumers"] if c["file"] == file],
        10,
        f"the consumer seen reading {file}",
    )


def test_a_named_consumer_away_keeps_its_files_and_resumes_with_nothing_lost(tmp_path):
    writer = write_files(tmp_path, size=BIG)  # it stalls in its file: no buffer holds one
    all_files = names(tmp_path)
    app = DumperConsumer("app", server_id=4242)
    with ServerThread(tmp_path, consumers=[app]) as s:
        reader = s.call(dump(s.port, all_files[2]))
        wait_holding(s, all_files[2])
        s.loop.call_soon_threadsafe(reader.close)  # it goes away
        wait_for(lambda: not on_loop(s, s.server.consumers), 10, "the dump ended")
        s.server.retention.policy.expire_s = 600
        s.call(_start(s.server.retention))
        wait_for(lambda: names(tmp_path) == all_files[2:], 10, "the files before its file")
        time.sleep(1.5)  # more checks: still held while it is away
        assert names(tmp_path) == all_files[2:]
        conn = pymysql.connect(host="127.0.0.1", port=s.port, user=USER, password=PASSWORD)
        with conn.cursor() as cur:
            cur.execute("SHOW CONSUMERS")
            (row,) = cur.fetchall()
        conn.close()
        assert row[0] == "app" and row[4] == "No" and row[5] == all_files[2]
        assert row[9] == all_files[2] and row[10] == ""
        admin = pymysql.connect(host="127.0.0.1", port=s.port, user="admin", password="adm")
        with admin.cursor() as cur:
            cur.execute(f"PURGE BINARY LOGS TO '{writer.file}'")  # the same rule: stopped there
        admin.close()
        assert names(tmp_path) == all_files[2:]
        start = BinlogPosition(all_files[2], 4)
        want = events_in(BinlogFiles(tmp_path), start)  # (it purges behind itself as it reads)
        got = s.call(read_to_end(s.port, start))
        assert [e for e in got if e[4] != 15] == want
    writer.close()


async def _start(retention) -> None:
    retention.start()


def on_loop(s: ServerThread, fn):
    """`fn()` on the server's loop (its sessions change there)."""

    async def call():
        return fn()

    return s.call(call())


def test_past_its_cap_the_hold_is_dropped_loudly_and_the_files_go(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="dumper.server.store.consumer_holds")
    writer = write_files(tmp_path, size=BIG)
    all_files = names(tmp_path)
    app = DumperConsumer("app", server_id=4242, max_hold_bytes=2 * BIG)
    with ServerThread(tmp_path, consumers=[app]) as s:
        reader = s.call(dump(s.port, all_files[0]))  # more than 3 files behind
        wait_for(
            lambda: on_loop(s, s.server.consumer_holds)["dropped"] == 1, 10, "the hold dropped"
        )
        s.loop.call_soon_threadsafe(reader.close)
        wait_for(lambda: not on_loop(s, s.server.consumers), 10, "the dump ended")
        s.server.retention.policy.expire_s = 600
        s.call(_start(s.server.retention))
        wait_for(lambda: names(tmp_path) == [writer.file], 10, "every file purged")
        (c,) = on_loop(s, s.server.consumer_holds)["consumers"]
        assert f"> max_hold_bytes {2 * BIG}" in c["dropped"] and c["holds"] == ""
    assert any("DROPPED" in r.getMessage() for r in caplog.records)
    writer.close()


def test_a_consumer_resumes_from_an_archived_position(tmp_path):
    live, archive = tmp_path / "binlog", tmp_path / "archive"
    live.mkdir()
    writer = write_files(live, files=FILES)
    all_files = names(live)
    mid = BinlogFiles(live).events(all_files[1])
    at = [ev.pos for ev in mid][3]  # an event boundary inside the second file
    with ServerThread(live, archive_dir=str(archive), expire_logs_seconds=600) as s:
        wait_for(lambda: names(live) == [writer.file], 10, "the expired files archived")
        assert sorted(p.name for p in archive.iterdir()) == all_files[:-1]
        conn = pymysql.connect(host="127.0.0.1", port=s.port, user=USER, password=PASSWORD)
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            assert [r[0] for r in cur.fetchall()] == [writer.file]  # MySQL's: live ones
            cur.execute("SHOW ALL BINARY LOGS")
            rows = cur.fetchall()
            cur.execute(f"SHOW BINLOG EVENTS IN '{all_files[0]}' LIMIT 2")
            assert len(cur.fetchall()) == 2
        conn.close()
        assert [(r[0], r[3]) for r in rows] == [(n, "Yes") for n in all_files[:-1]] + [
            (writer.file, "No")
        ]
        for start in (BinlogPosition(all_files[1], at), BinlogPosition(all_files[0], 4)):
            got = s.call(read_to_end(s.port, start))
            files = BinlogFiles(live, archive=archive)
            assert [e for e in got if e[4] != 15] == events_in(files, start), start
    writer.close()


def test_rotate_while_reading_from_the_archive(tmp_path):
    """A dump reading an archived file follows the index into the live files."""
    live, archive = tmp_path / "binlog", tmp_path / "archive"
    live.mkdir()
    writer = write_files(live, files=3)
    first = names(live)[0]
    files = BinlogFiles(live, archive=check_archive(archive))
    files.purge([first])
    assert names(live)[0] != first and (archive / first).exists()
    with ServerThread(live, archive_dir=str(archive)) as s:
        got = s.call(read_to_end(s.port, BinlogPosition(first, 4)))
    rotates = [struct.unpack_from("<Q", e, 19)[0] for e in got if e[4] == 4]
    assert len(rotates) >= 2 and sum(1 for e in got if e[4] == 16) >= 3  # XIDs
    writer.close()
    asyncio.set_event_loop(None)


def test_a_dropped_hold_shows_in_cdc_status_and_the_metrics():
    from cdc_cli.commands.pipeline import _served_lines
    from dumper.metrics import _from_status

    c = {
        "name": "app",
        "connected": False,
        "file": "binlog.000003",
        "position": 4,
        "lag_bytes": 5000,
        "lag_s": 700.0,
        "holds": "",
        "dropped": "behind for 700s > max_hold_s 600",
    }
    status = {"consumer_holds": {"consumers": [c], "dropped": 1}}
    lines = _served_lines(status)
    assert "1 dropped" in lines[0] and "HOLD DROPPED: behind for 700s" in lines[1]
    samples = {
        (s.name, s.labels.get("name")): s.value
        for m in _from_status(status, time.time())
        for s in m.samples
    }
    assert samples[("cdc_consumer_holds_dropped_total", None)] == 1
    assert samples[("cdc_consumer_hold_is_dropped", "app")] == 1
    assert samples[("cdc_consumer_hold_lag_bytes", "app")] == 5000


def test_archiving_to_another_disk_copies_then_unlinks(tmp_path, monkeypatch):
    """Across file systems (a rename fails with EXDEV) the file is copied under a temporary
    name, fsynced, renamed, and only then unlinked: whole at one place at every moment."""
    import errno

    from dumper.server.store import binlog_files

    writer = write_files(tmp_path / "live", files=3)
    first = names(tmp_path / "live")[0]
    data = (tmp_path / "live" / first).read_bytes()
    real = os.replace

    def no_cross_device(src, dst):
        if str(src).startswith(str(tmp_path / "live")) and "archive" in str(dst):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst)

    monkeypatch.setattr(binlog_files.os, "replace", no_cross_device)
    files = BinlogFiles(tmp_path / "live", archive=check_archive(tmp_path / "archive"))
    assert files.purge([first]) == [first]
    assert not (tmp_path / "live" / first).exists()
    assert (tmp_path / "archive" / first).read_bytes() == data
    assert [p.name for p in (tmp_path / "archive").iterdir()] == [first]  # no .part left
    writer.close()


def test_each_peer_and_stream_archives_apart():
    from cdc.config import DumperPeer
    from dumper.server import archive_of

    one = DumperConfig(archive_dir="/arch")
    assert str(archive_of(one, "/data/binlog")) == "/arch"
    peers = DumperConfig(archive_dir="/arch", peers=[DumperPeer(1), DumperPeer(2)], id=2)
    assert str(archive_of(peers, "/d2/binlog")) == "/arch/dumper-2"
    streams = DumperConfig(archive_dir="/arch", streams=2)
    assert str(archive_of(streams, "/data/binlog/stream1")) == "/arch/stream1"


# -- holds across an HA takeover --------------------------------------------------------------
def test_a_hold_survives_a_takeover_the_peers_learn_it(tmp_path):
    """Two peers serve byte-identical copies; a named consumer reads only from peer 1 (the
    leader) and stops in its third file. Peer 2 learns the position from peer 1's SHOW
    CONSUMERS; with peer 1 gone (a takeover), peer 2 still holds that file across a restart:
    PURGE stops there, SHOW CONSUMERS shows it, and the consumer resumes there byte-identical."""
    import shutil

    from cdc.config import DumperPeer
    from cdc_equipment.local_cluster.testing import free_base_port

    one, two = tmp_path / "one", tmp_path / "two"
    writer = write_files(one, size=BIG)  # it stalls in its file: no buffer holds one
    writer.close()
    shutil.copytree(one, two)
    all_files = names(one)
    base = free_base_port(1)
    peers = [DumperPeer(1, port=base), DumperPeer(2, port=base + 1)]
    ha = dict(
        consumers=[DumperConsumer("app", server_id=4242)],
        peers=peers,
        peer_user=USER,
        peer_password=PASSWORD,
    )
    leader = ServerThread(one, base, id=1, **ha)
    follower = ServerThread(two, base + 1, id=2, **ha)
    try:
        reader = leader.call(dump(leader.port, all_files[2]))
        wait_holding(leader, all_files[2])
        wait_holding(follower, all_files[2])  # learned from the leader
        (seen,) = on_loop(follower, follower.server.consumer_holds)["consumers"]
        assert seen["connected"] is False and seen["holds"] == all_files[2], seen
        leader.loop.call_soon_threadsafe(reader.close)
    finally:
        leader.stop()  # the leader goes away: peer 2 takes over
    follower.stop()
    with ServerThread(two, base + 1, id=2, **ha) as s:  # restarted: read back from its file
        admin = pymysql.connect(host="127.0.0.1", port=s.port, user="admin", password="adm")
        with admin.cursor() as cur:
            cur.execute(f"PURGE BINARY LOGS TO '{all_files[-1]}'")
            cur.execute("SHOW CONSUMERS")
            (row,) = cur.fetchall()
        admin.close()
        assert names(two) == all_files[2:]
        assert row[0] == "app" and row[4] == "No" and row[5] == all_files[2], row
        assert row[9] == all_files[2] and row[10] == ""
        start = BinlogPosition(all_files[2], 4)
        want = events_in(BinlogFiles(two), start)
        got = s.call(read_to_end(s.port, start))
        assert [e for e in got if e[4] != 15] == want
