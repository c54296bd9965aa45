"""Appending to a bytearray what the leader's encoder writes per event or per transaction: a
span of another buffer (a DN event copied out of the bytes it arrived in, `Statement.packed`,
with no bytes object per event), a number in decimal (the CTS mark's text) and a u64 patched in
place (the XID). Compiled modules use `splice.pxd` (`from cdc.binlog cimport splice`: a resize
and a memcpy, `src` a buffer pointer there), plain Python these, with the same arguments and
results (a negative number is refused by both)."""

from __future__ import annotations

import struct

_U64 = struct.Struct("<Q")


def append(out: bytearray, src: bytes, start: int, n: int) -> int:
    """`src[start:start + n]` appended to `out`; returns where it starts in `out`."""
    at = len(out)
    out += memoryview(src)[start : start + n]
    return at


def extend(out: bytearray, b: bytes) -> int:
    """`b` appended to `out` (`out += b`); returns where it starts in `out`."""
    at = len(out)
    out += b
    return at


def append_gap(out: bytearray, src: bytes, start: int, n: int, split: int, gap: bytes) -> int:
    """`src[start:start + n]` appended to `out` with `gap` inserted after its first `split`
    bytes (e.g. a rows v1 event turned into v2); returns where it starts in `out`."""
    at = len(out)
    view = memoryview(src)
    out += view[start : start + split]
    out += gap
    out += view[start + split : start + n]
    return at


def same(src: bytes, start: int, n: int, b: bytes) -> bool:
    """Whether `src[start:start + n]` equals `b` (compared in place)."""
    return len(b) == n and memoryview(src)[start : start + n] == b


def decimal_len(v: int) -> int:
    """How many digits `v` (≥ 0) has in decimal."""
    if v < 0:
        raise OverflowError("can't convert negative value to unsigned int")
    return len(b"%d" % v)


def append_decimal(out: bytearray, v: int) -> int:
    """`v` (≥ 0) appended to `out` in decimal ASCII, as `b"%d" % v`; returns where."""
    if v < 0:
        raise OverflowError("can't convert negative value to unsigned int")
    at = len(out)
    out += b"%d" % v
    return at


def write_u64(buf: bytearray, at: int, v: int) -> None:
    """`v` as a little-endian u64 at `at` of `buf`."""
    _U64.pack_into(buf, at, v)
