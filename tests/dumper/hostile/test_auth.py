"""Hostile logins: wrong passwords, unknown users, unknown plugins, oversized and malformed
handshakes. An unknown user must be indistinguishable from a known one with a wrong password
(same packets in the same order, then 1045), and the writer keeps writing meanwhile."""

from __future__ import annotations

import os

import pymysql
import pytest

from cdc.protocol import auth
from tests.dumper.hostile.conftest import (
    ADMIN,
    MAX_PACKET,
    SLAVE,
    closed_by_server,
    err_code,
    handshake_response,
    open_raw,
    packet,
    read_packet,
)


def transcript(live, user: str, plugin: str, response: bytes) -> list[tuple[int, bytes | int]]:
    """What the server answers a login, as (seq, kind): kind is the ERR code, or the first
    byte of any other packet; an auth switch is answered with a random wrong scramble."""
    sock, _ = open_raw(live)
    out: list[tuple[int, bytes | int]] = []
    with sock:
        sock.sendall(packet(handshake_response(user, response, plugin), 1))
        while True:
            try:
                seq, payload = read_packet(sock)
            except (EOFError, ConnectionError):
                return out
            code = err_code(payload)
            out.append((seq, code if code is not None else payload[:1]))
            if code is not None or payload[:1] == b"\x00":
                return out
            if payload[:1] == b"\xfe":  # auth switch: answer it, wrongly
                sock.sendall(packet(os.urandom(20), seq + 1))


@pytest.mark.parametrize(
    "plugin", [auth.NATIVE, auth.CACHING_SHA2, "dialog", "sha256_password", "x" * 200, ""]
)
def test_unknown_user_looks_like_a_wrong_password(healthy, plugin):
    wrong = os.urandom(20) if plugin != auth.CACHING_SHA2 else os.urandom(32)
    known = transcript(healthy, SLAVE[0], plugin, wrong)
    unknown = transcript(healthy, "nobody_" + os.urandom(4).hex(), plugin, wrong)
    assert known == unknown
    assert known[-1][1] == 1045


def test_wrong_passwords_and_right_ones(healthy):
    for user, password in [(SLAVE[0], "wrong"), ("ghost", ""), ("ghost", "x"), (SLAVE[0], "")]:
        with pytest.raises(pymysql.err.OperationalError) as err:
            healthy.connect((user, password))
        assert err.value.args[0] == 1045
    # a hundred wrong logins in a row change nothing for the right ones
    for _ in range(100):
        with pytest.raises(pymysql.err.OperationalError):
            healthy.connect((SLAVE[0], "wrong"))
    assert healthy.query("SELECT CURRENT_USER()", ADMIN)[0][0].startswith(ADMIN[0])


def test_oversized_handshake_is_refused_before_it_is_read(healthy):
    """Before login a packet may not exceed 128 KiB: the header alone gets ERR 1153."""
    sock, _ = open_raw(healthy)
    with sock:
        sock.sendall(b"\xff\xff\xff\x01")  # 16 MB announced, nothing sent
        seq, payload = read_packet(sock)
        assert err_code(payload) == 1153
        assert closed_by_server(sock)
    assert MAX_PACKET > 128 << 10  # (the login limit is the smaller one)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x00" * 31,
        b"\xff" * 32,  # PROTOCOL_41 + SSL request without TLS
        b"\x00\x02\x00\x00" + b"\x00" * 28 + b"user",  # no NUL after the name
        handshake_response("u", b"\x01" * 20, auth.NATIVE)[:40],
        handshake_response("u", b"x" * 255, auth.NATIVE)[:-30],  # lying response length
    ],
)
def test_malformed_handshakes(healthy, body):
    sock, _ = open_raw(healthy)
    with sock:
        sock.sendall(packet(body, 1))
        try:
            _, payload = read_packet(sock)
            assert err_code(payload) in (1043, 1045), payload
        except (EOFError, ConnectionError):
            pass  # dropping is clean too
        assert closed_by_server(sock)


def test_wrong_sequence_id_in_the_handshake(healthy):
    sock, salt = open_raw(healthy)
    with sock:
        scramble = auth.native_scramble(SLAVE[1], salt)
        sock.sendall(packet(handshake_response(SLAVE[0], scramble, auth.NATIVE), 5))
        _, payload = read_packet(sock)
        assert err_code(payload) == 1156
        assert closed_by_server(sock)
