"""max_allowed_packet over multi-packet commands (issue 19), against a real server with a limit
above one 16 MB chunk: a command split in chunks is served when it fits, refused with ERR 1153
at the header of the chunk that passes the limit (its body never sent), and a chunk with a
wrong sequence id is ERR 1156. Raw sockets: these are framing cases no client library makes."""

from __future__ import annotations

import struct
from types import SimpleNamespace

from cdc.protocol import auth
from cdc.protocol.packets import MAX_CHUNK, frame
from tests.dumper.helpers import PASSWORD, USER, ServerThread
from tests.dumper.hostile.conftest import (
    closed_by_server,
    err_code,
    handshake_response,
    open_raw,
    packet,
    read_packet,
)

LIMIT = 20 << 20


def login(port: int):
    sock, salt = open_raw(SimpleNamespace(port=port))
    scramble = auth.native_scramble(PASSWORD, salt)
    sock.sendall(packet(handshake_response(USER, scramble, auth.NATIVE), 1))
    assert read_packet(sock)[1][:1] == b"\x00"
    return sock


def is_eof(payload: bytes) -> bool:
    return payload[:1] == b"\xfe" and len(payload) < 9  # a row may start with 0xFE too


def test_multi_packet_commands_against_max_allowed_packet(binlogs):
    with ServerThread(binlogs.dir, max_allowed_packet=LIMIT) as srv:
        # 17 MB in two chunks, within the limit: served
        with login(srv.port) as sock:
            literal = b"a" * (17 << 20)
            sock.sendall(frame(b"\x03SELECT '" + literal + b"' AS s", 0)[0])
            assert read_packet(sock)[1] == b"\x01"
            while not is_eof(read_packet(sock)[1]):  # column definition
                pass
            seq, first = read_packet(sock)  # the row, in chunks of 16 MB
            row = bytearray(first)
            while len(first) == MAX_CHUNK:
                seq, first = read_packet(sock)
                row += first
            assert row.endswith(literal) and len(row) == 9 + len(literal)
            assert is_eof(read_packet(sock)[1])
        # a second full chunk would pass the limit: ERR 1153 from its header alone
        with login(srv.port) as sock:
            sock.sendall(struct.pack("<I", MAX_CHUNK) + b"\x03" + b"x" * (MAX_CHUNK - 1))
            sock.sendall(struct.pack("<I", MAX_CHUNK | 1 << 24))
            _, payload = read_packet(sock)
            assert err_code(payload) == 1153
            assert closed_by_server(sock)
        # the chunks of one command must number on: a repeated id is ERR 1156
        with login(srv.port) as sock:
            sock.sendall(struct.pack("<I", MAX_CHUNK) + b"\x03" + b"x" * (MAX_CHUNK - 1))
            sock.sendall(packet(b"tail", 0))
            _, payload = read_packet(sock)
            assert err_code(payload) == 1156
            assert closed_by_server(sock)
        # what is reported is what is enforced
        with login(srv.port) as sock:
            sock.sendall(packet(b"\x03SELECT @@max_allowed_packet", 0))
            assert read_packet(sock)[1] == b"\x01"
            while not is_eof(read_packet(sock)[1]):
                pass
            assert read_packet(sock)[1] == bytes((len(str(LIMIT)),)) + str(LIMIT).encode()
