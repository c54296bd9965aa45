"""`[dumper] client_timeout_s` on the write side (dumper/server/wire/conn.py, MySQL's
net_write_timeout): a client that takes nothing of what was sent to it for that long is cut off,
and a slow client that still takes bytes is not — even while the socket stays full. Real
sockets on loopback: the server side is a `Conn` on an asyncio server, the client a plain
socket that reads slowly or never."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from dumper.server.wire.conn import Conn

pytestmark = pytest.mark.asyncio(loop_scope="function")

TIMEOUT_S = 2.0
# One flush: at the slow reader's 128 kB/s it takes 8 s, four times the timeout.
CHUNK = 1024 * 1024


async def serve_until_done(reader_speed: float | None, run_s: float) -> tuple[str, float]:
    """A server Conn writing CHUNKs for `run_s` seconds to a client reading `reader_speed`
    bytes/s (None: never); (what ended the writes: "ran" or the error, seconds it took)."""
    result: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_client(reader, writer) -> None:
        conn = Conn(reader, writer, 1 << 24, lambda: 30.0, write_timeout=TIMEOUT_S)
        start = time.monotonic()
        try:
            while time.monotonic() - start < run_s:
                conn.send_framed(b"\0" * CHUNK, 0)
                await conn.flush()
            result.set_result(("ran", time.monotonic() - start))
        except ConnectionError as exc:
            result.set_result((type(exc).__name__, time.monotonic() - start))
        finally:
            writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    # An Ethernet MSS, as across a network: loopback's 64 kB one makes a slow reader's window
    # open only in 64 kB steps (silly-window avoidance), seconds apart at this speed.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1448)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    try:
        while not result.done():
            if reader_speed is not None:
                try:
                    sock.recv(int(reader_speed / 10))
                except BlockingIOError:
                    pass
            await asyncio.sleep(0.1)
        return result.result()
    finally:
        sock.close()
        server.close()


async def test_a_client_that_takes_nothing_is_cut_off():
    ended, took = await serve_until_done(None, run_s=30)
    assert ended == "ConnectionAbortedError"
    # no progress for TIMEOUT_S, seen at one of 4 looks per timeout
    assert TIMEOUT_S <= took < TIMEOUT_S * 1.25 + 1.0


async def test_a_slow_client_that_takes_bytes_is_not():
    # Its window reopens in steps of half its receive buffer (receiver-side silly-window
    # avoidance): 64 kB every 0.5 s here. A reader slower than half its buffer per timeout
    # would be cut off, as by MySQL's net_write_timeout.
    ended, took = await serve_until_done(128 * 1024, run_s=3 * TIMEOUT_S)
    assert ended == "ran", f"a slow reader was cut off after {took:.1f} s"
