"""Protocol primitives: framing (incl. >16 MB splits), length-encoded values, scrambles."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc.protocol import auth
from cdc.protocol.packets import (
    MAX_CHUNK,
    PacketBuffer,
    ProtocolError,
    err_packet,
    frame,
    lenenc_int,
    lenenc_str,
    parse_err,
    read_lenenc_int,
    read_lenenc_str,
)


@pytest.mark.parametrize("size", [0, 1, MAX_CHUNK - 1, MAX_CHUNK, MAX_CHUNK + 5, 2 * MAX_CHUNK])
def test_frame_and_reassemble(size):
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    data, seq = frame(payload, 3)
    chunks = size // MAX_CHUNK + 1
    assert seq == (3 + chunks) & 0xFF
    if size % MAX_CHUNK == 0 and size:
        assert data.endswith(bytes([0, 0, 0, (3 + chunks - 1) & 0xFF]))  # the empty trailer
    buf = PacketBuffer()
    out = []
    for i in range(0, len(data), 1 << 20):  # arbitrary read boundaries
        buf.feed(data[i : i + (1 << 20)])
        out += buf.packets()
    assert out == [payload]


def test_oversized_packet_is_refused():
    data, _ = frame(b"y" * (MAX_CHUNK + 10), 0)
    buf = PacketBuffer(max_payload=MAX_CHUNK)
    buf.feed(data)
    with pytest.raises(ProtocolError, match="larger than"):
        buf.packets()


@given(st.integers(0, 2**64 - 1))
def test_lenenc_int_round_trip(value):
    encoded = lenenc_int(value)
    assert read_lenenc_int(encoded + b"tail", 0) == (value, len(encoded))


@given(st.binary(max_size=70000))
def test_lenenc_str_round_trip(value):
    encoded = lenenc_str(value)
    assert read_lenenc_str(encoded, 0) == (value, len(encoded))


def test_truncated_lenenc_is_an_error():
    with pytest.raises(ProtocolError):
        read_lenenc_int(b"\xfe\x01", 0)
    with pytest.raises(ProtocolError):
        read_lenenc_str(b"\x05abc", 0)


def test_err_packet_round_trip():
    err = parse_err(err_packet(1236, "Could not find first log file name in binary log index file"))
    assert (err.code, err.sql_state) == (1236, "HY000") and "first log file" in err.message


def test_native_password_scramble_and_verify():
    salt = bytes(range(1, 21))
    stored = auth.native_hash("secret")
    assert stored.startswith("*") and len(stored) == 41
    assert auth.native_verify(stored, salt, auth.native_scramble("secret", salt))
    assert not auth.native_verify(stored, salt, auth.native_scramble("wrong", salt))
    assert auth.native_verify("", salt, b"") and not auth.native_verify("", salt, b"x")


def test_native_hash_matches_mysql_password_function():
    # SELECT PASSWORD('secret') on MariaDB 10.11
    assert auth.native_hash("secret") == "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
