"""Wire primitives shared by event bodies: length-encoded integers and strings, bitmaps."""

from __future__ import annotations

import struct

from .errors import CodecError

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

Buffer = bytes | bytearray | memoryview


def read_lenenc(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a length-encoded integer at `pos`; return (value, new_pos)."""
    if pos >= len(buf):
        raise CodecError(f"length-encoded integer at body offset {pos} is past the end")
    first = buf[pos]
    if first < 0xFB:
        return first, pos + 1
    if first == 0xFC:
        width = 2
    elif first == 0xFD:
        width = 3
    elif first == 0xFE:
        width = 8
    else:
        raise CodecError(f"invalid length-encoded integer prefix {first:#x} at body offset {pos}")
    end = pos + 1 + width
    if end > len(buf):
        raise CodecError(f"length-encoded integer at body offset {pos} is truncated")
    return int.from_bytes(buf[pos + 1 : end], "little"), end


def write_lenenc(value: int) -> bytes:
    if value < 0xFB:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + _U16.pack(value)
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + _U64.pack(value)


def read_lenenc_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    n, pos = read_lenenc(buf, pos)
    end = pos + n
    if end > len(buf):
        raise CodecError(f"length-encoded string of {n} bytes at body offset {pos} is truncated")
    return bytes(buf[pos:end]), end


def write_lenenc_bytes(value: bytes) -> bytes:
    return write_lenenc(len(value)) + value


def take(buf: Buffer, pos: int, n: int, what: str) -> tuple[memoryview, int]:
    """Slice n bytes at pos or raise a CodecError naming the field."""
    end = pos + n
    if n < 0 or end > len(buf):
        raise CodecError(f"{what}: needs {n} bytes at body offset {pos}, body has {len(buf)}")
    return memoryview(buf)[pos:end], end


def bitmap_bits(data: Buffer, count: int) -> list[bool]:
    """LSB-first bitmap (rows, TABLE_MAP null bits) to a list of booleans."""
    return [bool(data[i >> 3] & (1 << (i & 7))) for i in range(count)]


def bits_to_bitmap(bits: list[bool] | tuple[bool, ...]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def msb_bits(data: Buffer, count: int) -> list[bool]:
    """MSB-first bitmap (optional metadata SIGNEDNESS) to booleans."""
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def bits_to_msb_bitmap(bits: list[bool] | tuple[bool, ...]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 0x80 >> (i & 7)
    return bytes(out)
