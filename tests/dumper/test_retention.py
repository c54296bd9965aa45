"""Retention (issue 23, item 3): `expire_logs_seconds` and `max_binlog_total_size` purge files
automatically, never the active one, never one a connected consumer, a live HA follower or a
`@cdc_retain_from` mark still needs (held until they pass it, with a log line); PURGE BINARY
LOGS obeys the same rule; an HA follower's server purges its copy by the same rules (issue 33).
A real server with real clients and files of a real BinlogWriter."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time

import pymysql

from binlog_writer import BinlogCopier, BinlogWriter, FsyncPolicy
from cdc.binlog.events import XidEvent, cts_mark
from cdc.binlog.header import timestamp
from cdc.binlog.query import QueryEvent
from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import Command
from cdc.protocol.dump_client import BinlogPosition, DumpClient, DumpSettings
from dumper.server.dump.ack_gate import AckGate
from dumper.server.holders import holders
from dumper.server.store.binlog_files import BinlogFiles
from dumper.server.store.retention import Holder, allowed
from tests.dumper.helpers import PASSWORD, USER, ServerThread, wait_for

FILES = 5


BIG = 16 << 20  # a file a stalled reader cannot pass: more than the socket buffers hold


def write_files(directory, files: int = FILES, size: int = 4096) -> BinlogWriter:
    """`files` files of about `size` bytes (the last one active), the older ones dated an hour
    back."""
    writer = BinlogWriter(directory, max_file_size=size, fsync=FsyncPolicy.never(), server_id=7)
    pad = b"x" * min(size // 8, 64 << 10)
    i = 0
    while len(writer.files()) < files:
        i += 1
        writer.append_transaction([QueryEvent(b"BEGIN"), QueryEvent(pad), XidEvent(i), cts_mark(i)])
    writer.flush()
    old = time.time() - 3600
    for name in writer.files()[:-1]:
        os.utime(directory / name, (old, old))
    return writer


def names(directory) -> list[str]:
    return BinlogFiles(directory).names()


def dump(port: int, name: str) -> MysqlClient:
    """A blocking dump of `name` that reads nothing more than its first packets."""

    async def start() -> MysqlClient:
        c = await MysqlClient.connect("127.0.0.1", port, USER, PASSWORD)
        await c.query("SET @master_binlog_checksum = 'CRC32'")
        await c.send_command(Command.BINLOG_DUMP, struct.pack("<IHI", 4, 0, 4242) + name.encode())
        await c.read_packet()  # the fake ROTATE: the dump has begun
        return c

    return start()


def test_expired_files_go_but_not_the_active_one(tmp_path):
    writer = write_files(tmp_path)
    with ServerThread(tmp_path, expire_logs_seconds=600):
        wait_for(lambda: names(tmp_path) == [writer.file], 10, "the expired files purged")
    assert sorted(p.name for p in tmp_path.glob("binlog.0*")) == [writer.file]
    writer.close()


def test_the_newest_file_with_a_transaction_stays(tmp_path):
    """Its last transaction is where a restart (or an HA takeover of a copy) resumes: purging
    it behind a new file that holds none yet would send the pipeline back to every DN's first
    binlog."""
    writer = write_files(tmp_path)
    writer.rotate()  # a FlushLogs: the new active file holds no transaction yet
    writer.flush()
    old = time.time() - 3600
    for name in writer.files()[:-1]:
        os.utime(tmp_path / name, (old, old))
    last_two = writer.files()[-2:]
    with ServerThread(tmp_path, expire_logs_seconds=600):
        wait_for(lambda: names(tmp_path) == last_two, 10, "all but the last two purged")
        time.sleep(1.5)
        assert names(tmp_path) == last_two
    writer.close()


def test_a_consumer_holds_its_file_until_it_passes_it(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="dumper.server.store.retention")
    writer = write_files(tmp_path, size=BIG)
    all_files = names(tmp_path)
    with ServerThread(tmp_path) as s:
        reader = s.call(dump(s.port, all_files[2]))  # stops reading in the third file
        start_retention(s, expire_s=600)
        wait_for(lambda: names(tmp_path) == all_files[2:], 10, "files before the held one purged")
        time.sleep(2.5)  # a few more checks: still held, logged once
        assert names(tmp_path) == all_files[2:]
        held = [r.getMessage() for r in caplog.records if "held" in r.getMessage()]
        assert len(held) == 1 and all_files[2] in held[0] and "server_id 4242" in held[0], held
        s.loop.call_soon_threadsafe(reader.close)
        wait_for(lambda: names(tmp_path) == [writer.file], 10, "purged once the reader left")
    writer.close()


def test_total_size_limit_purges_the_oldest_files(tmp_path):
    writer = write_files(tmp_path)
    sizes = [f.size for f in BinlogFiles(tmp_path).files()]
    limit = sum(sizes[-2:])  # room for the last two files
    last_two = writer.files()[-2:]  # (the writer reads the index that the purge rewrites)
    with ServerThread(tmp_path, max_binlog_total_size=limit):
        wait_for(lambda: names(tmp_path) == last_two, 10, "the oldest files purged")
    writer.close()


def start_retention(s: ServerThread, expire_s: int) -> None:
    """Retention from now on (a server started with it purges at once, before a test's readers
    are in place)."""
    s.server.retention.policy.expire_s = expire_s

    async def start() -> None:
        s.server.retention.start()

    s.call(start())


def dumping(s: ServerThread) -> bool:
    return any(h.state.dump is not None for h in list(s.server.sessions.live.values()))


def _admin(port: int):
    return pymysql.connect(host="127.0.0.1", port=port, user="admin", password="adm")


def test_purge_statement_stops_at_a_file_a_consumer_reads(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="dumper.server.store.retention")
    writer = write_files(tmp_path, size=BIG)
    all_files = names(tmp_path)
    with ServerThread(tmp_path) as s:
        reader = s.call(dump(s.port, all_files[1]))
        with _admin(s.port) as admin, admin.cursor() as cur:
            cur.execute(f"PURGE BINARY LOGS TO '{all_files[4]}'")
            assert names(tmp_path) == all_files[1:]
            assert any(all_files[1] in r.getMessage() for r in caplog.records)
            s.loop.call_soon_threadsafe(reader.close)
            wait_for(lambda: not dumping(s), 10, "the reader gone")
            cur.execute(f"PURGE BINARY LOGS TO '{all_files[4]}'")
            assert names(tmp_path) == all_files[4:]
    writer.close()


def test_a_retain_mark_holds_the_backfill_hand_off(tmp_path):
    writer = write_files(tmp_path)
    all_files = names(tmp_path)
    with ServerThread(tmp_path) as s:
        conn = pymysql.connect(host="127.0.0.1", port=s.port, user=USER, password=PASSWORD)
        with conn.cursor() as cur:
            cur.execute(f"SET @cdc_retain_from = '{all_files[3]}'")
        start_retention(s, expire_s=600)
        wait_for(lambda: names(tmp_path) == all_files[3:], 10, "purged up to the mark")
        time.sleep(1.5)
        assert names(tmp_path) == all_files[3:]
        conn.close()
        wait_for(lambda: names(tmp_path) == [writer.file], 10, "purged once the mark is gone")
    writer.close()


def test_a_pinned_snapshot_holds_its_file_from_purge(tmp_path, caplog):
    """A snapshot transaction reads the binlog from its pinned position at each SELECT: PURGE
    (and retention) keep that file while the transaction lasts (issue 32)."""
    caplog.set_level(logging.INFO, logger="dumper.server.store.retention")
    writer = write_files(tmp_path)
    with ServerThread(tmp_path) as s:
        conn = pymysql.connect(host="127.0.0.1", port=s.port, user=USER, password=PASSWORD)
        with conn.cursor() as cur, _admin(s.port) as admin, admin.cursor() as purge:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            cur.execute("SHOW MASTER STATUS")
            pinned = cur.fetchone()[0]
            i = 1000
            while len(writer.files()) < FILES + 2:  # the binlog goes on past the snapshot
                i += 1
                writer.append_transaction(
                    [QueryEvent(b"BEGIN"), QueryEvent(b"y" * 512), XidEvent(i), cts_mark(i)]
                )
            writer.flush()
            newest = writer.files()[-1]
            purge.execute(f"PURGE BINARY LOGS TO '{newest}'")
            assert names(tmp_path)[0] == pinned
            assert any("snapshot transaction" in r.getMessage() for r in caplog.records)
            cur.execute("COMMIT")
            purge.execute(f"PURGE BINARY LOGS TO '{newest}'")
            assert names(tmp_path)[0] == newest
        conn.close()
    writer.close()


def test_live_followers_hold_what_they_copy(tmp_path):
    write_files(tmp_path).close()
    files = BinlogFiles(tmp_path)
    now = [100.0]
    gate = AckGate({9901, 9902}, live_ms=5000, wait_ms=1000, clock=lambda: now[0])
    victims = files.names()[:-1]
    gate.record(9901, victims[1], 200)
    now[0] += 3
    gate.record(9902, victims[3], 200)
    ok, holder = allowed(victims, holders({}, gate))
    assert ok == victims[:1] and holder is not None and "9901" in holder.who
    now[0] += 3  # 9901 silent for 6 s > lease: gone, no longer holds anything
    ok, holder = allowed(victims, holders({}, gate))
    assert ok == victims[:3] and holder is not None and "9902" in holder.who
    assert allowed(victims, [Holder("binlog.000099", "x")]) == (victims, None)


def test_the_holding_dump_reads_on_to_the_end_while_files_behind_it_go(tmp_path):
    writer = write_files(tmp_path)
    all_files = names(tmp_path)
    with ServerThread(tmp_path) as s:

        async def read_all() -> int:
            c = await MysqlClient.connect("127.0.0.1", s.port, USER, PASSWORD)
            await c.query("SET @master_binlog_checksum = 'CRC32'")
            body = struct.pack("<IHI", 4, 1, 4243) + all_files[0].encode()  # non-blocking
            await c.send_command(Command.BINLOG_DUMP, body)
            n = 0
            while (await asyncio.wait_for(c.read_packet(), 10))[0] == 0:
                n += 1
                if n == 3:  # retention starts while this dump holds the first file
                    s.server.retention.policy.expire_s = 600
                    s.server.retention.start()
                    await asyncio.sleep(1.5)
            c.close()
            return n

        assert s.call(read_all()) > 4 * FILES
        wait_for(lambda: names(tmp_path) == [writer.file], 10, "the files behind it purged")
    writer.close()


async def copy_from(port: int, copier: BinlogCopier) -> None:
    """What an HA follower's copy does (`dumper.ha.following.LeaderCopy`), up to the server's current end."""
    settings = DumpSettings(
        "127.0.0.1",
        port,
        USER,
        PASSWORD,
        server_id=9902,
        name="leader",
        reconnect=False,
        keep_rotate=True,
        non_blocking=True,
    )
    client = DumpClient(settings, BinlogPosition(*copier.resume_point()))
    try:
        async for batch in client.batches():
            for ev in batch:
                copier.add(ev.file, ev.pos, ev.data)
    finally:
        copier.sync()
        await client.close()


def test_a_follower_purges_its_copy_by_the_same_rules(tmp_path):
    """A follower's server (read-only) purges its copy as the leader's purges its files: the
    oldest ones over `max_binlog_total_size`, never one a reader of its own holds; the copy goes
    on into the purged directory and stays byte-identical to the leader's files."""
    leader_dir, copy_dir = tmp_path / "leader", tmp_path / "copy"
    leader_dir.mkdir()
    writer = write_files(leader_dir)
    copier = BinlogCopier(copy_dir)
    with ServerThread(leader_dir) as leader:
        leader.call(copy_from(leader.port, copier))
        all_files = names(copy_dir)
        assert all_files == names(leader_dir)
        # A finished file of the copy is dated by its ROTATE, as the leader's was when it
        # wrote it, not by when it was copied (`expire_logs_seconds` of a late copy).
        for name in all_files[:-1]:
            rotate = list(BinlogFiles(copy_dir).events(name))[-1].data
            assert int((copy_dir / name).stat().st_mtime) == timestamp(rotate)
        with ServerThread(copy_dir) as follower:
            follower.server.sql.read_only = lambda: True  # as an HA follower's server is
            # Its own reader holds a file (a mark: what a dump's file does, for small files).
            reader = pymysql.connect(
                host="127.0.0.1", port=follower.port, user=USER, password=PASSWORD
            )
            with reader.cursor() as cur:
                cur.execute(f"SET @cdc_retain_from = '{all_files[2]}'")
            sizes = [f.size for f in BinlogFiles(copy_dir).files()]
            follower.server.retention.policy.max_total = sum(sizes[-2:])
            follower.call(_start(follower.server.retention))
            wait_for(
                lambda: names(copy_dir) == all_files[2:], 10, "the copy purged to the held file"
            )
            # The leader goes on (two more files); so does the copy, after the purge.
            i = 1000
            while len(writer.files()) < FILES + 2:
                i += 1
                pad = QueryEvent(b"x" * 512)
                writer.append_transaction([QueryEvent(b"BEGIN"), pad, XidEvent(i), cts_mark(i)])
            writer.flush()
            leader.call(copy_from(leader.port, copier))
            assert names(copy_dir) == all_files[2:] + writer.files()[FILES:]
            sizes = [f.size for f in BinlogFiles(copy_dir).files()]
            follower.server.retention.policy.max_total = sum(sizes[-2:])
            reader.close()
            wait_for(
                lambda: names(copy_dir) == writer.files()[-2:], 10, "purged once the reader left"
            )
    for name in names(copy_dir):
        assert (copy_dir / name).read_bytes() == (leader_dir / name).read_bytes(), name
    copier.close()
    writer.close()


async def _start(retention) -> None:
    retention.start()
