"""MySQL wire-protocol framing and primitive encodings (pure: bytes in, values out).

A packet is `[3 payload_len][1 seq][payload]`; a payload of 0xFFFFFF bytes or more is split into
0xFFFFFF-byte chunks, and a payload whose last chunk is exactly 0xFFFFFF long is followed by an
empty packet. `PacketBuffer` reassembles packets from arbitrary socket reads without copying
each chunk more than once, which is what keeps a binlog dump stream fast in Python.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MAX_CHUNK = 0xFFFFFF

OK = 0x00
EOF = 0xFE
ERR = 0xFF
LOCAL_INFILE = 0xFB

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class ProtocolError(RuntimeError):
    """The peer sent bytes that do not follow the MySQL protocol."""


@dataclass(slots=True)
class ServerError(RuntimeError):
    """An ERR packet from the server."""

    code: int
    sql_state: str
    message: str

    def __str__(self) -> str:
        return f"({self.code}, {self.sql_state}) {self.message}"


def frame(payload: bytes | bytearray | memoryview, seq: int) -> tuple[bytes, int]:
    """Frame `payload` into one or more packets; returns (bytes, next sequence id)."""
    n = len(payload)
    if n < MAX_CHUNK:
        return _U32.pack(n | (seq & 0xFF) << 24) + bytes(payload), (seq + 1) & 0xFF
    parts = []
    view = memoryview(payload)
    offset = 0
    while True:
        chunk = view[offset : offset + MAX_CHUNK]
        parts.append(_U32.pack(len(chunk) | (seq & 0xFF) << 24))
        parts.append(chunk.tobytes())
        seq = (seq + 1) & 0xFF
        offset += len(chunk)
        if len(chunk) < MAX_CHUNK:
            return b"".join(parts), seq


class PacketBuffer:
    """Accumulates socket reads; yields complete logical packets (split packets joined)."""

    __slots__ = ("_buf", "_pos", "_partial", "seq", "max_payload")

    def __init__(self, max_payload: int = 1 << 30):
        self._buf = bytearray()
        self._pos = 0
        self._partial: list[bytes] | None = None
        self.seq = 0  # sequence id of the last packet seen
        self.max_payload = max_payload

    def feed(self, data: bytes) -> None:
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def take_raw(self) -> bytes:
        """The bytes not yet cut into packets, handed over (the buffer is left empty): for a
        caller that walks a stream's packets itself (the binlog dump)."""
        if self._partial is not None:
            raise ProtocolError("a split packet is half-read: the raw stream cannot be taken")
        data = bytes(self._buf[self._pos :])
        self._buf.clear()
        self._pos = 0
        return data

    def packets(self) -> list[bytes]:
        """All complete packets in the buffer (possibly none)."""
        out = []
        buf, pos, end = self._buf, self._pos, len(self._buf)
        unpack = _U32.unpack_from
        while end - pos >= 4:
            header = unpack(buf, pos)[0]
            length = header & 0xFFFFFF
            if end - pos - 4 < length:
                break
            self.seq = header >> 24
            payload = bytes(buf[pos + 4 : pos + 4 + length])
            pos += 4 + length
            if length == MAX_CHUNK or self._partial is not None:
                if self._partial is None:
                    self._partial = []
                self._partial.append(payload)
                if sum(map(len, self._partial)) > self.max_payload:
                    raise ProtocolError(f"packet larger than {self.max_payload} bytes")
                if length == MAX_CHUNK:
                    continue
                payload = b"".join(self._partial)
                self._partial = None
            out.append(payload)
        self._pos = pos
        return out


# -- length-encoded values ------------------------------------------------------------------------


def lenenc_int(value: int) -> bytes:
    if value < 251:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + _U16.pack(value)
    if value < 1 << 24:
        return b"\xfd" + _U32.pack(value)[:3]
    return b"\xfe" + _U64.pack(value)


def lenenc_str(value: bytes | str) -> bytes:
    if isinstance(value, str):
        value = value.encode()
    return lenenc_int(len(value)) + value


def read_lenenc_int(buf: bytes | memoryview, pos: int) -> tuple[int | None, int]:
    """(value, new position); value None for the NULL marker 0xFB."""
    try:
        first = buf[pos]
        if first < 251:
            return first, pos + 1
        if first == 0xFB:
            return None, pos + 1
        if first == 0xFC:
            return _U16.unpack_from(buf, pos + 1)[0], pos + 3
        if first == 0xFD:
            return int.from_bytes(buf[pos + 1 : pos + 4], "little"), pos + 4
        if first == 0xFE:
            return _U64.unpack_from(buf, pos + 1)[0], pos + 9
    except (IndexError, struct.error):
        pass
    raise ProtocolError(f"bad length-encoded integer at offset {pos}")


def read_lenenc_str(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_lenenc_int(buf, pos)
    if length is None:
        return None, pos
    if pos + length > len(buf):
        raise ProtocolError(f"length-encoded string of {length} bytes overruns the packet")
    return bytes(buf[pos : pos + length]), pos + length


def read_nul_str(buf: bytes, pos: int) -> tuple[bytes, int]:
    end = buf.find(b"\0", pos)
    if end < 0:
        raise ProtocolError("missing NUL terminator")
    return bytes(buf[pos:end]), end + 1


# -- generic responses ----------------------------------------------------------------------------


def is_eof(payload: bytes) -> bool:
    return len(payload) < 9 and payload[:1] == b"\xfe"


def parse_err(payload: bytes) -> ServerError:
    if len(payload) < 3 or payload[0] != ERR:
        raise ProtocolError("not an ERR packet")
    code = _U16.unpack_from(payload, 1)[0]
    if payload[3:4] == b"#":
        state, message = payload[4:9].decode("ascii", "replace"), payload[9:]
    else:
        state, message = "HY000", payload[3:]
    return ServerError(code, state, message.decode("utf-8", "replace"))


def err_packet(code: int, message: str, sql_state: str = "HY000") -> bytes:
    return b"\xff" + _U16.pack(code) + b"#" + sql_state.encode("ascii")[:5] + message.encode()


def ok_packet(
    affected: int = 0,
    last_insert_id: int = 0,
    status: int = 0x0002,
    warnings: int = 0,
    header: int = OK,
) -> bytes:
    return (
        bytes((header,))
        + lenenc_int(affected)
        + lenenc_int(last_insert_id)
        + _U16.pack(status)
        + _U16.pack(warnings)
    )


def eof_packet(status: int = 0x0002, warnings: int = 0) -> bytes:
    return b"\xfe" + _U16.pack(warnings) + _U16.pack(status)
