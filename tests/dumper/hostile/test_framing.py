"""Framing attacks on logged-in connections, with raw sockets: wrong sequence ids, lying and
oversized lengths, truncated packets, pipelined commands, and every command byte 0x00-0xFF.
Each gets MySQL's answer (ERR 1156 / 1153 and a close, ERR 1047, or the command's own answer)
and the writer keeps writing."""

from __future__ import annotations

import socket
import struct

from cdc.binlog.gtid import GtidSet, sid_of
from tests.dumper.hostile.conftest import (
    ADMIN,
    MAX_PACKET,
    closed_by_server,
    err_code,
    login_raw,
    packet,
    read_packet,
)

COM_QUERY = 0x03
# Commands that end the connection by design: QUIT; a dump and a GTID dump (ERR, then closed,
# like MySQL's "fake COM_QUIT" after a dump).
ENDS_CONNECTION = {0x01, 0x12, 0x1E}
# Commands with an answer of their own; every other byte is ERR 1047.
SUPPORTED = {
    0x01,
    0x02,
    0x03,
    0x04,
    0x09,
    0x0E,
    0x12,
    0x14,
    0x15,
    0x16,
    0x17,
    0x1A,
    0x1C,
    0x1E,
    0x1F,
}
# COM_STMT_SEND_LONG_DATA and COM_STMT_CLOSE: never answered (as in MySQL).
NO_REPLY = {0x18, 0x19}


def query(sock: socket.socket, sql: bytes) -> bytes:
    sock.sendall(packet(bytes((COM_QUERY,)) + sql, 0))
    return read_packet(sock)[1]


def rest_of_result(sock: socket.socket) -> None:
    """After a column count: the column definitions, EOF, the rows, EOF (no DEPRECATE_EOF)."""
    for _ in range(2):
        while read_packet(sock)[1][:1] != b"\xfe":
            pass


def test_wrong_sequence_id_closes_with_1156(healthy):
    with login_raw(healthy) as sock:
        sock.sendall(packet(b"\x03SELECT 1", 3))
        seq, payload = read_packet(sock)
        assert err_code(payload) == 1156 and b"out of order" in payload
        assert closed_by_server(sock)


def test_oversized_length_is_refused_from_the_header(healthy):
    """ERR 1153 before the body is sent at all: nothing is buffered for it."""
    for length in (MAX_PACKET + 1, 0xFFFFFF):  # one packet; the first chunk of a multi-packet
        with login_raw(healthy) as sock:
            sock.sendall(struct.pack("<I", length)[:3] + b"\x00" + b"\x03SELECT ")
            _, payload = read_packet(sock)
            assert err_code(payload) == 1153
            assert b"max_allowed_packet" in payload
            assert closed_by_server(sock)


def test_a_command_of_exactly_max_allowed_packet_is_served(healthy):
    head = b"SELECT LENGTH('"
    tail = b"') AS n"
    literal = b"a" * (MAX_PACKET - 1 - len(head) - len(tail))
    with login_raw(healthy) as sock:
        sock.sendall(packet(b"\x03" + head + literal + tail, 0))
        _, payload = read_packet(sock)
        # LENGTH() is not supported: the point is a clean SQL answer to a full-size packet
        assert err_code(payload) == 1305, payload[:80]
        assert query(sock, b"SELECT @@max_allowed_packet")[:1] == b"\x01"  # a result set
        rest_of_result(sock)


def test_max_allowed_packet_reported_is_the_one_enforced(healthy):
    assert healthy.query("SELECT @@max_allowed_packet") == [(MAX_PACKET,)]
    assert healthy.query("SHOW VARIABLES LIKE 'max_allowed_packet'") == [
        ("max_allowed_packet", str(MAX_PACKET))
    ]


def test_truncated_packets_end_only_their_connection(healthy):
    for cut in (1, 3, 4, 10):
        with login_raw(healthy) as sock:
            data = packet(b"\x03SELECT 'truncated'", 0)
            sock.sendall(data[:cut])
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_server(sock)


def test_pipelined_commands_are_all_answered(healthy):
    with login_raw(healthy) as sock:
        sock.sendall(packet(b"\x0e", 0) + packet(b"\x03SELECT 2", 0) + packet(b"\x0e", 0))
        assert read_packet(sock)[1][:1] == b"\x00"  # OK to the ping
        assert read_packet(sock)[1] == b"\x01"  # one column
        rest_of_result(sock)
        assert read_packet(sock)[1][:1] == b"\x00"  # OK to the second ping


def test_every_command_byte(healthy):
    sock = login_raw(healthy)
    try:
        for cmd in range(256):
            sock.sendall(packet(bytes((cmd,)), 0))
            if cmd in NO_REPLY:
                answer = query(sock, b"SELECT 1")
                assert answer == b"\x01", f"after 0x{cmd:02x}: {answer[:60]!r}"
                rest_of_result(sock)
                continue
            try:
                seq, payload = read_packet(sock)
            except (EOFError, ConnectionError):
                assert cmd == 0x01, f"command 0x{cmd:02x} dropped the connection"
                sock.close()
                sock = login_raw(healthy)
                continue
            assert seq == 1, f"0x{cmd:02x}: answer with sequence id {seq}"
            if cmd not in SUPPORTED:
                assert err_code(payload) == 1047, f"0x{cmd:02x}: {payload[:60]!r}"
            elif cmd in ENDS_CONNECTION:
                assert payload[:1] == b"\xff", f"0x{cmd:02x}: {payload[:60]!r}"
                assert closed_by_server(sock)
                sock.close()
                sock = login_raw(healthy)
                continue
            elif cmd == 0x03:
                assert err_code(payload) == 1065  # empty query
            # the connection is still sane after each
            answer = query(sock, b"SELECT 1")
            assert answer == b"\x01", f"after 0x{cmd:02x}: {answer[:60]!r}"
            rest_of_result(sock)
    finally:
        sock.close()


def test_a_gtid_set_as_big_as_a_packet(healthy):
    """COM_BINLOG_DUMP_GTID with a set of 60,000 intervals (what fits in max_allowed_packet):
    read off the event loop (other sessions are answered meanwhile), a clean 1236, and no
    answer or log line the size of the set."""
    uuid = healthy.query("SELECT @@server_uuid", ADMIN)[0][0]
    n = 60_000
    encoded = GtidSet({sid_of(uuid): [(2 * i + 1, 2 * i + 2) for i in range(n)]}).encode()
    body = struct.pack("<HII", 4, 4242, 0) + struct.pack("<QI", 4, len(encoded)) + encoded
    with login_raw(healthy) as sock:
        sock.sendall(packet(b"\x1e" + body, 0))
        for _ in range(5):  # meanwhile
            assert healthy.query("SELECT 1", ADMIN) == [(1,)]
        _, answer = read_packet(sock)
    assert err_code(answer) == 1236 and len(answer) < 1000, answer[:200]
    assert b"more GTIDs than the source has" in answer
    assert max(len(line) for line in healthy.log.read_text().splitlines()) < 10_000
