"""A before-image spelled straight into a text row (`image_text.ImageSpeller`) is byte for byte
the row of today's path, each value decoded (`cdc.binlog.row_image`) and spelled
(`values.text_value`): over the recorded real MariaDB images of every column type, and over
random values of every type (NULLs, negative and unsigned integers of each width, DATETIME(6)
fractions cut to each precision, unicode and long strings)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.reader import read_file
from cdc.binlog.row_image import DateTime, decode_image, encode_image
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column, TableMapEvent, real_type
from read_path import spelling
from read_path.first_images import layout
from read_path.image_text import ImageSpeller
from read_path.image_walk import value_starts
from read_path.values import (
    ENUM_FLAG,
    SET_FLAG,
    UNSIGNED_FLAG,
    ColumnDef,
    text_row,
    text_value,
)
from tests.cdc.binlog.strategies import column_and_value

FIXTURES = Path(__file__).parents[1] / "cdc" / "binlog" / "fixtures"
MEMBERS = ("a", "b", "c")
# A result set's column type for a binlog column's (as MariaDB 10.11 sends them).
_RESULT_TYPE = {T.VARCHAR: T.VAR_STRING, T.JSON: T.BLOB, T.DATETIME2: T.DATETIME}
_RESULT_TYPE |= {T.TIME2: T.TIME, T.TIMESTAMP2: T.TIMESTAMP}


def result_column(column: Column, unsigned: bool = False) -> ColumnDef:
    """The DN's result column for a binlog column: type, flags, length and decimals."""
    t, meta, flags, decimals, length = column.type, column.meta, 0, 0, 11
    if column.unsigned or unsigned:
        flags |= UNSIGNED_FLAG
    if t == T.STRING and real_type(t, meta) == T.ENUM:
        flags |= ENUM_FLAG
    if t == T.STRING and real_type(t, meta) == T.SET:
        flags |= SET_FLAG
    if t in (T.DATETIME2, T.TIME2, T.TIMESTAMP2):
        decimals = meta
    if t == T.BIT:
        length = (meta >> 8) * 8 + (meta & 0xFF)
    charset = 63 if t == T.BLOB and column.collation == 63 else 45
    t = _RESULT_TYPE.get(t, t)
    return ColumnDef(b"d", b"t", b"t", b"c", b"c", charset, length, t, flags, decimals, b"\0\0")


def today(columns: list[Column], defs: list[ColumnDef], data: bytes, members: dict) -> bytes:
    """The text row as the read spelled a before-image before image_text."""
    values = decode_image(columns, [True] * len(columns), memoryview(data), 0)[0]
    return text_row([text_value(c, values[i], members.get(i, ())) for i, c in enumerate(defs)])


def images(columns: list[Column], data: bytes) -> list[bytes]:
    """The full row images in a rows event's data."""
    fixed, prefix = layout(columns)
    starts = [0] * len(columns)
    out, pos = [], 0
    while pos < len(data):
        end = value_starts(data, pos, fixed, prefix, starts)
        out.append(data[pos:end])
        pos = end
    return out


def recorded() -> tuple[list[Column], list[bytes]]:
    """fx.all_types's columns and row images in the recorded MariaDB binlog
    (tests/cdc/binlog/fixture_data.py: every column type, extremes, zero dates, NULLs)."""
    _, reader = read_file(sorted(FIXTURES.glob("mariadb-10.11-binlog.*"))[0])
    maps: dict[int, TableMapEvent] = {}
    columns: list[Column] = []
    out: list[bytes] = []
    for ev in reader.decoded(strict=True):
        body = ev.body
        if isinstance(body, TableMapEvent):
            maps[body.table_id] = body
        elif isinstance(body, RowsEvent) and maps[body.table_id].table == b"all_types":
            columns = maps[body.table_id].columns()
            out += images(columns, bytes(body.rows_data))
    assert columns and len(out) >= 3
    return columns, out


def test_the_pxd_declares_the_kinds_as_spelling_py():
    pxd = Path(spelling.__file__).with_suffix(".pxd").read_text()
    declared = {name: int(v) for name, v in re.findall(r"^    (\w+) = (\d+)$", pxd, re.M)}
    assert declared == {k.name: int(k) for k in spelling.Spelling}


@pytest.mark.parametrize("latin1", [False, True], ids=["utf8mb4", "latin1"])
def test_recorded_images_of_every_type_spell_as_today(latin1):
    columns, rows = recorded()
    defs = [result_column(c) for c in columns]
    if latin1:  # a latin1 string is converted to utf8mb4 (by text_value)
        defs = [replace(d, declared="latin1_swedish_ci") for d in defs]
    members = {i: MEMBERS for i, d in enumerate(defs) if d.flags & (ENUM_FLAG | SET_FLAG)}
    speller = ImageSpeller(columns, defs, members, False)
    kinds = {spelling.Spelling(k) for k in speller.kinds}
    assert kinds >= {spelling.Spelling.INTEGER, spelling.Spelling.UNSIGNED}
    assert kinds >= {spelling.Spelling.DATETIME, spelling.Spelling.DATE}
    assert (spelling.Spelling.TEXT in kinds) != latin1
    every = list(range(len(columns)))
    some = every[::-3]  # a select list's columns, in any order
    for data in rows:
        assert speller.row(data, every) == today(columns, defs, data, members)
        values = decode_image(columns, [True] * len(columns), memoryview(data), 0)[0]
        texts = [text_value(defs[i], values[i], members.get(i, ())) for i in some]
        assert speller.row(data, some) == text_row(texts)


@settings(max_examples=300, deadline=None)
@given(
    hs.lists(hs.tuples(column_and_value(), hs.booleans(), hs.booleans()), min_size=1, max_size=8)
)
def test_random_values_spell_as_today(drawn):
    columns = [column for (column, _), _, _ in drawn]
    values = [None if null else value for (_, value), null, _ in drawn]
    defs = [result_column(c, unsigned) for (c, _), _, unsigned in drawn]
    members = {i: MEMBERS for i, d in enumerate(defs) if d.flags & (ENUM_FLAG | SET_FLAG)}
    data = encode_image(columns, [True] * len(columns), values)
    speller = ImageSpeller(columns, defs, members, False)
    assert speller.row(data, list(range(len(columns)))) == today(columns, defs, data, members)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (Column(T.BLOB, 3), "é" * 40_000),  # a length of 3 bytes (0xFD)
        (Column(T.BLOB, 2), "ü" * 200),  # 400 bytes: a length of 2 (0xFC)
        (Column(T.LONGLONG), -(1 << 63)),
        (Column(T.LONGLONG, unsigned=True), (1 << 64) - 1),
        (Column(T.DATETIME2, 6), (9999, 12, 31, 23, 59, 59, 999999)),
        (Column(T.DATETIME2, 5), (1000, 1, 1, 0, 0, 0, 10)),
    ],
)
def test_extremes_spell_as_today(column, value):
    if isinstance(value, tuple):
        value = DateTime(*value)
    data = encode_image([column], [True], [value])
    defs = [result_column(column)]
    assert ImageSpeller([column], defs, {}, False).row(data, [0]) == today([column], defs, data, {})
