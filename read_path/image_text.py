"""The before-images a snapshot read emits (read_path/changes.py), spelled straight into text
rows: each column's value read from the image's bytes and written as the text protocol spells
it, a length-encoded string (NULL as 0xFB), with no decoded value in between. Python spent
about 9 µs decoding a 4-column image (`cdc.binlog.row_image`) and as much again spelling it
(`values.text_value`).

How a column is spelled is chosen once per table map (`ImageSpeller`, `spelling.Spelling`):
integers, strings the DN sends as they are, DATETIME2 and DATE are spelled here; every other
column, and a value out of the ranges spelled here, by `text_value` from its decoded value, as
before (tests/read_path/test_units.py checks the two agree for every column type).

Plain Python that Cython compiles unchanged when it is there (cdc/compiled.py lists this
module; image_text.pxd gives its C types; `COMPILED` says which one runs)."""

from __future__ import annotations

from collections.abc import Callable

from cdc.binlog.row_image import decode_value
from cdc.binlog.table_map import Column
from cdc.compiled import is_compiled
from cdc.protocol.constants import ColumnType as T
from read_path import spelling
from read_path.collation import single_byte
from read_path.first_images import layout
from read_path.image_walk import value_starts
from read_path.values import (
    ENUM_FLAG,
    NUMERIC_TYPES,
    SET_FLAG,
    ColumnDef,
    text_value,
)

NULL = 0xFB  # a length-encoded field's NULL marker
_INT_SIZES = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}
_DATES = (T.DATE, T.NEWDATE)


class ImageSpeller:
    """The before-images of one table map (its `columns`) as text rows of a result whose
    columns are `defs` (the DN's, with the declared collations): how each column is spelled,
    chosen here once. A None in `defs`: a column the result does not have (one added after
    the point a read is as of), never asked for."""

    def __init__(
        self,
        columns: list[Column],
        defs: list[ColumnDef | None],
        members: dict[int, tuple[str, ...]],
        exact_floats: bool,
    ) -> None:
        self.columns = columns
        self.fixed, self.prefix = fixed, prefix = layout(columns)
        self.kinds: list[int] = []
        self.sizes: list[int] = []
        self.decimals: list[int] = []
        self.fallback: list[Callable[[bytes, int], bytes | None]] = []
        for i, (column, col) in enumerate(zip(columns, defs, strict=True)):
            if col is None:
                self.kinds.append(spelling.Spelling.OTHER)
                self.sizes.append(0)
                self.decimals.append(0)
                self.fallback.append(_absent)
                continue
            kind, size = spelling_of(column, col, prefix[i])
            self.kinds.append(kind)
            self.sizes.append(size)
            self.decimals.append(col.decimals if 0 < col.decimals <= 6 else 0)
            self.fallback.append(_fallback(column, col, members.get(i, ()), exact_floats, i))
        self.starts = [0] * len(columns)

    def row(self, data: bytes, wanted: list[int]) -> bytes:
        """The text row of the columns `wanted` (positions) of the image `data`."""
        value_starts(data, 0, self.fixed, self.prefix, self.starts)
        return spell_row(
            data, wanted, self.starts, self.kinds, self.sizes, self.decimals, self.fallback
        )


def spelling_of(column: Column, col: ColumnDef, prefix: int) -> tuple[int, int]:
    """(how `column`'s values are spelled, their `sizes` entry), as `text_value` spells the
    value `decode_value` gives: an integer unsigned when either the binlog or the DN says so
    (`values.integer`), a string as it is unless latin1 or ascii (converted to utf8mb4)."""
    t = column.type
    if col.flags & (ENUM_FLAG | SET_FLAG):
        return spelling.Spelling.OTHER, 0
    if t in _INT_SIZES and col.type == t:
        unsigned = column.unsigned or col.unsigned
        kind = spelling.Spelling.UNSIGNED if unsigned else spelling.Spelling.INTEGER
        return kind, _INT_SIZES[t]
    if prefix and col.type not in NUMERIC_TYPES:
        if col.declared is None or not single_byte(col.declared):
            return spelling.Spelling.TEXT, prefix
    if t == T.DATETIME2 and col.type == T.DATETIME:
        return spelling.Spelling.DATETIME, (column.meta + 1) // 2
    if t in _DATES and col.type in _DATES:
        return spelling.Spelling.DATE, 0
    return spelling.Spelling.OTHER, 0


def _absent(data: bytes, start: int) -> bytes | None:
    raise AssertionError("a column the result does not have was asked for")


def _fallback(
    column: Column, col: ColumnDef, members: tuple[str, ...], exact_floats: bool, i: int
) -> Callable[[bytes, int], bytes | None]:
    def spell(data: bytes, start: int) -> bytes | None:
        value = decode_value(column, memoryview(data), start, i)[0]
        return text_value(col, value, members, exact_floats)

    return spell


def spell_row(
    data: bytes,
    wanted: list,
    starts: list,
    kinds: list,
    sizes: list,
    decimals: list,
    fallback: list,
) -> bytes:  # C types: image_text.pxd
    """The text row of the columns `wanted` of the image `data` whose values start at
    `starts` (-1: NULL; `image_walk.value_starts`): one pass to size it, one to write it."""
    p = data  # C: the bytes' buffer
    n = len(wanted)
    texts = None  # the fallback's texts, by place in `wanted`
    total = 0
    for j in range(n):
        i = wanted[j]
        start = starts[i]
        if start < 0:
            total += 1
            continue
        length = _length(p, start, kinds[i], sizes[i], decimals[i])
        if length < 0:
            if texts is None:
                texts = [None] * n
            text = fallback[i](data, start)
            texts[j] = text
            length = len(text)
        total += _lenenc_size(length) + length
    out = bytearray(total)
    q = out  # C: the bytearray's buffer, each byte written in C
    at = 0
    for j in range(n):
        i = wanted[j]
        start = starts[i]
        if start < 0:
            q[at] = NULL
            at += 1
            continue
        text = None if texts is None else texts[j]
        if text is not None:
            at = _put_text(q, at, text)
            continue
        kind = kinds[i]
        size = sizes[i]
        length = _length(p, start, kind, size, decimals[i])
        at = _put_length(q, at, length)
        if kind == spelling.Spelling.TEXT:
            at = _put_bytes(q, at, p, start + size, length)
        elif kind == spelling.Spelling.DATETIME:
            at = _put_datetime(q, at, p, start, size, decimals[i])
        elif kind == spelling.Spelling.DATE:
            at = _put_date(q, at, _unsigned(p, start, 3, False))
        else:
            at = _put_integer(q, at, p, start, size, kind == spelling.Spelling.INTEGER, length)
    return bytes(out)


def _length(p, start, kind, size, decimals):  # C types: image_text.pxd
    """The length of the text of the value at p[start:], or -1 when this module does not
    spell it (the column's fallback does)."""
    if kind == spelling.Spelling.TEXT:
        return _unsigned(p, start, size, False)
    if kind == spelling.Spelling.INTEGER or kind == spelling.Spelling.UNSIGNED:
        signed = kind == spelling.Spelling.INTEGER
        negative = signed and p[start + size - 1] >> 7
        return _digits(_magnitude(p, start, size, signed)) + (1 if negative else 0)
    if kind == spelling.Spelling.DATETIME:
        v = _unsigned(p, start, 5, True)
        if not v >> 39 or _datetime2(v) >> 22 > 13 * 9999 + 12:
            return -1  # before year 0 or after 9999: not 4 digits
        if _fraction(p, start + 5, size) > 999999:
            return -1
        return 19 + (decimals + 1 if decimals else 0)
    if kind == spelling.Spelling.DATE:
        return 10 if _unsigned(p, start, 3, False) >> 9 <= 9999 else -1
    return -1


def _unsigned(p, start, size, big_endian):  # C types: image_text.pxd
    """The unsigned integer of p[start:start + size] (size ≤ 8)."""
    u = 0
    for k in range(size):
        byte = p[start + k]  # C: 64 bits wide, so a shift by up to 56 does not overflow
        if big_endian:
            u = u << 8 | byte
        else:
            u |= byte << (8 * k)
    return u


def _magnitude(p, start, size, signed):  # C types: image_text.pxd
    """The absolute value of the little-endian integer at p[start:start + size]."""
    u = _unsigned(p, start, size, False)
    if not signed or not p[start + size - 1] >> 7:
        return u
    half = 1
    half <<= 8 * size - 1  # C: 64 bits wide; 2 * half would not fit a LONGLONG's
    return half - (u - half)


def _datetime2(v):  # C types: image_text.pxd
    """A DATETIME2's 5 bytes (big-endian, at least 2^39) less their offset, 2^39 (row_image's
    _DATETIMEF_INT_OFS): its bits year * 13 + month, day, hour, minute, second."""
    return v - (v >> 39 << 39)  # C: shifted in 64 bits (a literal 1 << 39 would not fit an int)


def _fraction(p, start, size):  # C types: image_text.pxd
    """A DATETIME2's microseconds from its `size` bytes of fraction (big-endian)."""
    if size == 0:
        return 0
    v = _unsigned(p, start, size, True)
    return v * (10000 if size == 1 else 100 if size == 2 else 1)


def _digits(v):  # C types: image_text.pxd
    """How many decimal digits `v` has."""
    n = 1
    while v >= 10:
        v //= 10
        n += 1
    return n


def _lenenc_size(length):  # C types: image_text.pxd
    """The bytes a length-encoded string of `length` bytes takes before them."""
    if length < 251:
        return 1
    if length < 1 << 16:
        return 3
    if length < 1 << 24:
        return 4
    return 9


def _put_length(q, at, length):  # C types: image_text.pxd
    """A length-encoded string's length at q[at:]; where its bytes start."""
    size = _lenenc_size(length)
    if size == 1:
        q[at] = length
        return at + 1
    q[at] = 0xFC if size == 3 else 0xFD if size == 4 else 0xFE
    for k in range(size - 1):
        q[at + 1 + k] = (length >> (8 * k)) & 0xFF
    return at + size


def _put_text(q, at, text: bytes):  # C types: image_text.pxd
    """`text` as a length-encoded string at q[at:]; where it ends."""
    p = text  # C: the bytes' buffer
    at = _put_length(q, at, len(text))
    return _put_bytes(q, at, p, 0, len(text))


def _put_bytes(q, at, p, start, length):  # C types: image_text.pxd
    for k in range(length):
        q[at + k] = p[start + k]
    return at + length


def _put_number(q, at, v, width):  # C types: image_text.pxd
    """`v` in `width` decimal digits (zero-padded, the leftmost dropped if it has more) at
    q[at:]; where they end."""
    for k in range(width - 1, -1, -1):
        q[at + k] = 48 + v % 10
        v //= 10
    return at + width


def _put_integer(q, at, p, start, size, signed, length):  # C types: image_text.pxd
    """The integer at p[start:] as its `length` characters (a minus, then its digits)."""
    if signed and p[start + size - 1] >> 7:
        q[at] = 45  # "-"
        return _put_number(q, at + 1, _magnitude(p, start, size, True), length - 1)
    return _put_number(q, at, _magnitude(p, start, size, False), length)


def _put_date(q, at, v):  # C types: image_text.pxd
    """A DATE's 3 bytes (read as a little-endian integer) as YYYY-MM-DD."""
    at = _put_number(q, at, v >> 9, 4)
    q[at] = 45  # "-"
    at = _put_number(q, at + 1, (v >> 5) & 15, 2)
    q[at] = 45
    return _put_number(q, at + 1, v & 31, 2)


def _put_datetime(q, at, p, start, size, decimals):  # C types: image_text.pxd
    """A DATETIME2 as YYYY-MM-DD hh:mm:ss[.ffffff cut to `decimals`] (row_image's
    decode_datetime2, then values._datetime)."""
    v = _datetime2(_unsigned(p, start, 5, True))
    ymd = v >> 17
    hms = v & 0x1FFFF
    ym = ymd >> 5
    at = _put_number(q, at, ym // 13, 4)
    q[at] = 45  # "-"
    at = _put_number(q, at + 1, ym % 13, 2)
    q[at] = 45
    at = _put_number(q, at + 1, ymd & 31, 2)
    q[at] = 32  # " "
    at = _put_number(q, at + 1, hms >> 12, 2)
    q[at] = 58  # ":"
    at = _put_number(q, at + 1, (hms >> 6) & 63, 2)
    q[at] = 58
    at = _put_number(q, at + 1, hms & 63, 2)
    if decimals:
        micro = _fraction(p, start + 5, size)
        for _ in range(6 - decimals):
            micro //= 10  # the digits shown: the first `decimals` of six
        q[at] = 46  # "."
        at = _put_number(q, at + 1, micro, decimals)
    return at


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
