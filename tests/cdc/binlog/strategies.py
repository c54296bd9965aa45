"""Hypothesis strategies: columns of every type with matching random values."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from hypothesis import strategies as st

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.row_image import Date, DateTime, Timestamp
from cdc.binlog.table_map import Column, string_meta

_INT_BITS = {T.TINY: 8, T.SHORT: 16, T.INT24: 24, T.LONG: 32, T.LONGLONG: 64}


def _int_values(t: int, unsigned: bool):
    bits = _INT_BITS[t]
    if unsigned:
        return st.integers(0, (1 << bits) - 1)
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


@st.composite
def decimal_column_and_value(draw):
    precision = draw(st.integers(1, 65))
    scale = draw(st.integers(0, min(30, precision)))
    intg = precision - scale
    int_part = draw(st.integers(0, 10**intg - 1)) if intg else 0
    frac = draw(st.integers(0, 10**scale - 1)) if scale else 0
    sign = draw(st.sampled_from(["", "-"]))
    text = f"{sign}{int_part}" + (f".{frac:0{scale}d}" if scale else "")
    return Column(T.NEWDECIMAL, precision << 8 | scale), Decimal(text)


def _frac(fsp: int):
    step = 10 ** (6 - fsp)
    return st.integers(0, 10**fsp - 1).map(lambda v: v * step)


@st.composite
def column_and_value(draw):
    kind = draw(
        st.sampled_from(
            [
                "int",
                "float",
                "double",
                "decimal",
                "varchar",
                "char",
                "enum",
                "set",
                "blob",
                "date",
                "time2",
                "datetime2",
                "timestamp2",
                "year",
                "bit",
                "geometry",
                "json",
            ]
        )
    )
    if kind == "int":
        t = draw(st.sampled_from(list(_INT_BITS)))
        unsigned = draw(st.booleans())
        col, value = Column(t, unsigned=unsigned), draw(_int_values(t, unsigned))
    elif kind == "float":
        col, value = Column(T.FLOAT, 4), draw(st.floats(width=32, allow_nan=False))
    elif kind == "double":
        col, value = Column(T.DOUBLE, 8), draw(st.floats(allow_nan=False))
    elif kind == "decimal":
        col, value = draw(decimal_column_and_value())
    elif kind == "varchar":
        max_len = draw(st.sampled_from([10, 255, 256, 1200, 65535]))
        col, value = (
            Column(T.VARCHAR, max_len, collation=45),
            draw(st.binary(max_size=min(max_len, 300))),
        )
    elif kind == "char":
        length = draw(st.sampled_from([4, 40, 255, 400, 1020]))
        col, value = (
            Column(T.STRING, string_meta(T.STRING, length)),
            draw(st.binary(max_size=min(length, 300))),
        )
    elif kind == "enum":
        pack = draw(st.sampled_from([1, 2]))
        col, value = (
            Column(T.STRING, string_meta(T.ENUM, pack), enum_values=(b"a", b"b")),
            draw(st.integers(0, (1 << (8 * pack)) - 1)),
        )
    elif kind == "set":
        pack = draw(st.sampled_from([1, 2, 3, 4, 8]))
        col, value = (
            Column(T.STRING, string_meta(T.SET, pack), set_values=(b"x",)),
            draw(st.integers(0, (1 << (8 * pack)) - 1)),
        )
    elif kind == "blob":
        pack = draw(st.integers(1, 4))
        col, value = (
            Column(T.BLOB, pack, collation=63),
            draw(st.binary(max_size=255 if pack == 1 else 2000)),
        )
    elif kind == "geometry":
        col, value = Column(T.GEOMETRY, 4), draw(st.binary(max_size=100))
    elif kind == "json":
        col, value = Column(T.JSON, 4), draw(st.binary(max_size=100))
    elif kind == "date":
        col, value = (
            Column(T.DATE),
            Date(draw(st.integers(0, 9999)), draw(st.integers(0, 12)), draw(st.integers(0, 31))),
        )
    elif kind == "time2":
        fsp = draw(st.integers(0, 6))
        us = draw(st.integers(0, 838 * 3600 + 59 * 60 + 59)) * 1_000_000 + draw(_frac(fsp))
        sign = draw(st.sampled_from([1, -1]))
        col, value = Column(T.TIME2, fsp), sign * dt.timedelta(microseconds=us)
    elif kind == "datetime2":
        fsp = draw(st.integers(0, 6))
        col = Column(T.DATETIME2, fsp)
        value = DateTime(
            draw(st.integers(0, 9999)),
            draw(st.integers(0, 12)),
            draw(st.integers(0, 31)),
            draw(st.integers(0, 23)),
            draw(st.integers(0, 59)),
            draw(st.integers(0, 59)),
            draw(_frac(fsp)),
        )
    elif kind == "timestamp2":
        fsp = draw(st.integers(0, 6))
        col, value = (
            Column(T.TIMESTAMP2, fsp),
            Timestamp(draw(st.integers(0, 2**32 - 1)), draw(_frac(fsp))),
        )
    elif kind == "year":
        col, value = Column(T.YEAR), draw(st.sampled_from([0, *range(1901, 2156)]))
    else:
        nbits = draw(st.integers(1, 64))
        col, value = (
            Column(T.BIT, (nbits // 8) << 8 | (nbits % 8)),
            draw(st.integers(0, (1 << nbits) - 1)),
        )
    if draw(st.booleans()) and draw(st.booleans()):
        value = None  # NULL (~25%)
    return col, value


columns_and_rows = st.lists(column_and_value(), min_size=1, max_size=12)
