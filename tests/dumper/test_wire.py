"""The dump stream and the wire protocol at byte level, with our asyncio client and raw sockets:
preamble, checksums, heartbeats, EOF, >16 MB events, dump errors, auth, and bad input that must
leave other clients unaffected."""

from __future__ import annotations

import asyncio
import struct
import zlib

import pytest

from cdc.protocol import auth
from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import Capability as Cap
from cdc.protocol.constants import Command
from cdc.protocol.packets import MAX_CHUNK, ServerError, frame, parse_err
from tests.dumper.binlog_gen import FileBuilder
from tests.dumper.helpers import PASSWORD, USER, ServerThread, await_for

pytestmark = pytest.mark.asyncio(loop_scope="function")


def dump_body(name: str, pos: int, flags: int = 0, server_id: int = 9) -> bytes:
    return struct.pack("<IHI", pos, flags, server_id) + name.encode()


async def client(port: int, user: str = USER, password: str = PASSWORD) -> MysqlClient:
    return await MysqlClient.connect("127.0.0.1", port, user, password)


async def start_dump(port: int, name: str, pos: int, checksum: str | None = "CRC32", **kw):
    c = await client(port)
    if checksum is not None:
        await c.query(f"SET @master_binlog_checksum = '{checksum}'")
    if "heartbeat" in kw:
        await c.query(f"SET @master_heartbeat_period = {int(kw.pop('heartbeat') * 1e9)}")
    await c.send_command(Command.BINLOG_DUMP, dump_body(name, pos, **kw))
    return c


async def read_event(c: MysqlClient, timeout: float = 5) -> bytes:
    payload = await asyncio.wait_for(c.read_packet(), timeout)
    if payload[0] == 0xFF:
        raise parse_err(payload)
    return payload


async def assert_alive(port: int) -> None:
    c = await client(port)
    assert (await c.query("SELECT 1")).rows == [("1",)]
    await c.quit()


def header(event: bytes) -> tuple[int, int, int, int, int, int]:
    return struct.unpack_from("<IBIIIH", event, 0)


async def test_preamble_events_and_eof(server, binlogs):
    c = await start_dump(server.port, "binlog.000001", 4, flags=1)
    first = (await read_event(c))[1:]
    ts, typ, sid, size, log_pos, flags = header(first)
    assert (ts, typ, sid, log_pos, flags) == (0, 4, 100, 0, 0x20)
    assert first[19:27] == struct.pack("<Q", 4) and first[27:-4] == b"binlog.000001"
    assert zlib.crc32(first[:-4]) == struct.unpack("<I", first[-4:])[0]  # declared CRC32
    fde = (await read_event(c))[1:]
    assert fde == (binlogs.dir / "binlog.000001").read_bytes()[4:123]
    events = []
    while True:
        p = await read_event(c)
        if p[0] == 0xFE:
            assert len(p) < 9  # classic EOF: our client did not ask for DEPRECATE_EOF
            break
        events.append(p[1:])
    types = [e[4] for e in events]
    assert types.count(4) == 2  # the real ROTATE of file 1, then the fake one for file 2
    i = types.index(15)  # FDE of file 2: in-use flag cleared, CRC still right
    fde2 = events[i]
    assert header(fde2)[5] & 1 == 0 and zlib.crc32(fde2[:-4]) == struct.unpack("<I", fde2[-4:])[0]
    assert header(events[i - 1])[0] == 0 and header(events[i - 1])[5] == 0x20  # fake ROTATE
    body = b"".join(events[i + 1 :])
    assert body == (binlogs.dir / "binlog.000002").read_bytes()[123:]
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(c.read_packet(), 5)  # the server ends the connection like MySQL


async def test_mid_file_start_and_heartbeats(server, binlogs):
    pos = 154  # the first BEGIN of file 2, after FDE (123) and PREVIOUS_GTIDS (154)
    c = await start_dump(server.port, "binlog.000002", pos, checksum="NONE", heartbeat=0.3)
    rotate = (await read_event(c))[1:]
    assert rotate[27:] == b"binlog.000002"  # NONE declared: no CRC on the first fake ROTATE
    fde = (await read_event(c))[1:]
    assert header(fde)[4] == 0 and fde[19 + 52 : 19 + 56] == bytes(4)  # log_pos, created = 0
    assert zlib.crc32(fde[:-4]) == struct.unpack("<I", fde[-4:])[0]
    size = (binlogs.dir / "binlog.000002").stat().st_size
    got = b""
    while len(got) < size - pos:
        got += (await read_event(c))[1:]
    assert got == (binlogs.dir / "binlog.000002").read_bytes()[pos:]
    hb = (await read_event(c, timeout=2))[1:]
    ts, typ, sid, esize, log_pos, flags = header(hb)
    assert (typ, log_pos, flags) == (27, size, 0) and hb[19:-4] == b"binlog.000002"
    # COM_PING during a dump (BinaryLogClient keepalive) is ignored; the stream goes on.
    c.write_packet(bytes((Command.PING,)), seq=0)
    assert header((await read_event(c, timeout=2))[1:])[1] == 27
    c.close()
    await await_for(
        lambda: not server.server.sessions.live, 3, "dump session gone after disconnect"
    )


async def test_dump_errors(server, binlogs):
    cases = [
        ("binlog.000009", 4, "Could not find first log file name in binary log index file"),
        ("binlog.000001", 3, "Client requested master to start replication from position < 4"),
        ("binlog.000001", 10**6, "Client requested master to start replication from position > file size"),
        ("binlog.000001", 200, "Client requested master to start replication from position 200"),
    ]  # fmt: skip
    for name, pos, text in cases:
        c = await start_dump(server.port, name, pos)
        with pytest.raises(ServerError) as err:
            await read_event(c)
        assert err.value.code == 1236 and err.value.message.startswith(text), err.value
    await assert_alive(server.port)


async def test_checksum_not_declared_is_refused(server):
    c = await start_dump(server.port, "binlog.000001", 4, checksum=None)
    with pytest.raises(ServerError) as err:
        await read_event(c)
    assert "Slave can not handle replication events with the checksum" in err.value.message


async def test_large_events_are_split(tmp_path):
    d = tmp_path / "big"
    d.mkdir()
    f = FileBuilder()
    # Payload = 0x00 + event: an event of MAX_CHUNK-1 bytes makes the payload exactly one full
    # chunk (a trailing empty packet must follow); the other one spans two chunks.
    sizes = [MAX_CHUNK - 1, MAX_CHUNK + 1000]
    for size in sizes:
        f.add(29, bytes((0,)) + b"x" * (size - 19 - 4 - 1), flags=0x80)
    f.query("COMMIT")
    f.flush(d / "binlog.000001")
    (d / "binlog.index").write_text("./binlog.000001\n")
    with ServerThread(d) as srv:
        c = await start_dump(srv.port, "binlog.000001", 154, flags=1)
        await read_event(c)
        await read_event(c)
        data = (d / "binlog.000001").read_bytes()
        pos = 154
        for size in [*sizes, len(data) - 154 - sum(sizes)]:
            ev = (await read_event(c, timeout=30))[1:]
            assert len(ev) == size and ev == data[pos : pos + size]
            pos += size
        assert (await read_event(c))[0] == 0xFE


async def test_auth_results(server):
    with pytest.raises(ServerError) as err:
        await client(server.port, USER, "wrong")
    assert err.value.code == 1045
    assert err.value.message == f"Access denied for user '{USER}'@'127.0.0.1' (using password: YES)"
    with pytest.raises(ServerError) as err:
        await client(server.port, "ghost", "")
    assert err.value.message.endswith("(using password: NO)")
    reader = await client(server.port, "reader", "pw")
    await reader.send_command(
        Command.REGISTER_SLAVE, struct.pack("<IBBBHII", 5, 0, 0, 0, 3306, 0, 0)
    )
    assert parse_err(await reader.read_packet()).code == 1227
    await reader.send_command(Command.BINLOG_DUMP, dump_body("binlog.000001", 4))
    assert parse_err(await reader.read_packet()).code == 1227


async def _raw(port: int):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    head = await r.readexactly(4)
    greeting = await r.readexactly(int.from_bytes(head[:3], "little"))
    return r, w, greeting


async def _read(r) -> bytes:
    head = await asyncio.wait_for(r.readexactly(4), 5)
    return await r.readexactly(int.from_bytes(head[:3], "little"))


async def test_caching_sha2_fast_auth_and_auth_switch(server):
    from cdc.protocol.client import parse_handshake

    for plugin, expect_fast in ((auth.CACHING_SHA2, True), ("mysql_clear_password", False)):
        r, w, greeting = await _raw(server.port)
        salt = parse_handshake(greeting).salt
        caps = Cap.PROTOCOL_41 | Cap.SECURE_CONNECTION | Cap.PLUGIN_AUTH | Cap.LONG_PASSWORD
        resp = auth.caching_sha2_scramble(PASSWORD, salt) if expect_fast else PASSWORD.encode()
        body = struct.pack("<IIB23x", caps, 1 << 24, 45) + USER.encode() + b"\0"
        body += bytes((len(resp),)) + resp + plugin.encode() + b"\0"
        w.write(frame(body, 1)[0])
        reply = await _read(r)
        if expect_fast:
            assert reply == b"\x01\x03"
        else:
            assert reply[0] == 0xFE and reply[1:].startswith(b"mysql_native_password\0")
            w.write(frame(auth.native_scramble(PASSWORD, salt), 3)[0])
        assert (await _read(r))[0] == 0x00
        w.close()


async def test_bad_input_leaves_others_working(server):
    good = await client(server.port)
    # 1. garbage instead of a handshake response
    r, w, _ = await _raw(server.port)
    w.write(frame(b"\x05garbage", 1)[0])
    err = parse_err(await _read(r))
    assert err.code == 1043
    w.close()
    # 2. bytes that are not even packets, then a half packet and a hang-up
    for junk in (b"\xff\xff", b"\x64\x00\x00\x01short"):
        r, w, _ = await _raw(server.port)
        w.write(junk)
        await w.drain()
        w.close()
    # 3. an unknown command byte and an empty packet: ERR, and the connection stays usable
    c = await client(server.port)
    await c.send_command(0x77)  # type: ignore[arg-type]
    assert parse_err(await c.read_packet()).code == 1047
    c.write_packet(b"", seq=0)
    await c._writer.drain()
    assert parse_err(await c.read_packet()).code == 1047
    assert (await c.query("SELECT @@version")).rows == [("5.7.44-cdc-log",)]
    # 4. a malformed dump request
    await c.send_command(Command.BINLOG_DUMP, b"\x01\x02")
    assert parse_err(await c.read_packet()).code == 1105
    # the first client never noticed
    assert (await good.query("SHOW MASTER STATUS")).rows[0][0] == "binlog.000002"
    await assert_alive(server.port)


async def test_connection_limit(binlogs):
    with ServerThread(binlogs.dir, max_connections=2) as srv:
        a, b = await client(srv.port), await client(srv.port)
        with pytest.raises(ServerError) as err:
            await client(srv.port)
        assert err.value.code == 1040
        await a.quit()
        await await_for(lambda: len(srv.server.sessions.live) < 2, 3, "a slot")
        await (await client(srv.port)).quit()
        await b.quit()
