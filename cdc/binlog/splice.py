"""Appending a span of one buffer to a bytearray, as the leader's encoder copies a DN event out
of the bytes it arrived in (`Statement.packed`) into the batch it writes: no bytes object per
event. Compiled modules use `splice.pxd` (`from cdc.binlog cimport splice`: a resize and a
memcpy, `src` a buffer pointer there), plain Python these, with the same arguments."""

from __future__ import annotations


def append(out: bytearray, src: bytes, start: int, n: int) -> int:
    """`src[start:start + n]` appended to `out`; returns where it starts in `out`."""
    at = len(out)
    out += memoryview(src)[start : start + n]
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
