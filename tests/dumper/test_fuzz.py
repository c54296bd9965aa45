"""Fuzz the dumper's packet parsing with hypothesis: garbage before or after authentication,
random command packets, truncated frames. The server must answer or drop that client, never
crash or hang, and keep serving others. CDC_FUZZ_EXAMPLES raises the count for a long run."""

from __future__ import annotations

import os
import socket
import struct

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.protocol import auth
from tests.dumper.binlog_gen import write_fixture
from tests.dumper.helpers import PASSWORD, USER, ServerThread

EXAMPLES = int(os.environ.get("CDC_FUZZ_EXAMPLES", "40"))


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    with ServerThread(write_fixture(tmp_path_factory.mktemp("fuzz")).dir) as s:
        yield s


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
def test_garbage_never_hurts_the_server(fuzzed, after_auth, chunks):
    s = fuzzed
    with socket.create_connection(("127.0.0.1", s.port), timeout=2) as sock:
        sock.settimeout(0.05)
        if after_auth:
            authenticate(sock)
            sock.settimeout(0.05)
        else:
            recv_some(sock)
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except OSError:
                break
            recv_some(sock)
    # Another client is served normally, every time.
    conn = pymysql.connect(
        host="127.0.0.1", port=s.port, user=USER, password=PASSWORD, connect_timeout=5
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            assert cur.fetchone()[0].startswith("binlog.")
    finally:
        conn.close()
