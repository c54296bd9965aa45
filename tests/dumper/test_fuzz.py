"""Fuzz the dumper's packet parsing with hypothesis: garbage before or after authentication,
random command packets, truncated frames. The server must answer or drop that client, never
crash or hang, and keep serving others. CDC_FUZZ_EXAMPLES raises the count for a long run
(`make fuzz`: 100,000)."""

from __future__ import annotations

import socket
import struct

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.protocol import auth
from tests.dumper.binlog_gen import write_fixture
from tests.dumper.helpers import PASSWORD, USER, ServerThread
from tests.fuzz_support import examples, memory_bound

EXAMPLES = examples(200)
bounded_memory = memory_bound(EXAMPLES)
HANG_S = 10  # the server must answer or close within this after the client's EOF


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    with ServerThread(write_fixture(tmp_path_factory.mktemp("fuzz")).dir) as s:
        yield s


@pytest.fixture(scope="module")
def bystander(fuzzed):
    """A client connected all along: the garbage of the others must never disturb it."""
    conn = pymysql.connect(
        host="127.0.0.1", port=fuzzed.port, user=USER, password=PASSWORD, connect_timeout=5
    )
    yield conn
    conn.close()


def drain(sock: socket.socket) -> None:
    """Read until the server closes: after our EOF it must finish (answer and/or close) rather
    than wait forever for the rest of a packet or a stream."""
    sock.settimeout(HANG_S)
    try:
        while sock.recv(65536):
            pass
    except ConnectionError:
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open {HANG_S}s after EOF") from None


def recv_some(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except (TimeoutError, OSError):
        return b""


def authenticate(sock: socket.socket) -> None:
    greeting = recv_some(sock)
    salt = greeting[greeting.index(b"\0", 5) + 5 : greeting.index(b"\0", 5) + 13]
    rest = greeting[greeting.index(b"\0", 5) + 32 :]
    salt += rest[: rest.index(b"\0")]
    scramble = auth.native_scramble(PASSWORD, salt)
    caps = 0x0200 | 0x8000 | 0x00080000  # PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH
    body = struct.pack("<IIB23x", caps, 1 << 24, 45) + USER.encode() + b"\0"
    body += bytes((len(scramble),)) + scramble + b"mysql_native_password\0"
    sock.sendall(struct.pack("<I", len(body) | 1 << 24) + body)
    sock.settimeout(2)
    assert recv_some(sock)[4:5] == b"\x00", "authentication failed"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    after_auth=st.booleans(),
    chunks=st.lists(
        st.one_of(
            st.binary(max_size=300),  # raw garbage
            st.builds(  # well-framed packets with random commands and bodies
                lambda cmd, body, seq: (
                    struct.pack("<I", (len(body) + 1) | seq << 24) + bytes([cmd]) + body
                ),
                st.integers(0, 255),
                st.binary(max_size=200),
                st.integers(0, 255),
            ),
            st.builds(
                lambda n: struct.pack("<I", n)[:3] + b"\x00", st.integers(0, 0xFFFFFF)
            ),  # lying length
        ),
        max_size=6,
    ),
)
def test_garbage_never_hurts_the_server(fuzzed, bystander, after_auth, chunks):
    s = fuzzed
    with socket.create_connection(("127.0.0.1", s.port), timeout=2) as sock:
        if after_auth:
            authenticate(sock)
        else:
            recv_some(sock)
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except OSError:
                break
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # already dropped by the server
        drain(sock)
    # The client connected all along is served normally, every time; a new one too.
    with bystander.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        assert cur.fetchone()[0].startswith("binlog.")
    global _examples
    _examples += 1
    if _examples % 100 == 1:
        conn = pymysql.connect(
            host="127.0.0.1", port=s.port, user=USER, password=PASSWORD, connect_timeout=5
        )
        conn.close()


_examples = 0
