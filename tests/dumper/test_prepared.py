"""Prepared statements (dumper/server/wire/prepared.py): placeholders outside quotes, parameters bound
as literals from COM_STMT_EXECUTE bodies, binary rows; malformed bodies give a clean error."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.protocol.constants import ColumnType
from cdc.protocol.packets import lenenc_str
from cdc.protocol.resultset import UNSIGNED_FLAG, Column, binary_row
from dumper.server import sql
from dumper.server.wire import prepared
from dumper.server.wire.binary_rows import BinaryRows


def test_placeholders_outside_quotes_only():
    text = "SELECT '?', \"?\", `?` FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?"
    assert prepared.placeholders(text) == [len(text) - 1]
    assert prepared.placeholders("SELECT 'it''s ?' , ?") == [19]


class PARSER:
    """What PREPARE asks of the session's query handler (`sql.QueryExecutor` splits and
    parses with these)."""

    split = staticmethod(sql.split_statements)
    check = staticmethod(sql.parse)


def test_prepare_checks_the_statement_and_counts_parameters():
    stmt = prepared.prepare(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_NAME = ?", PARSER
    )
    assert stmt.params == 1
    assert prepared.prepare("SHOW DATABASES", PARSER).params == 0
    with pytest.raises(sql.SqlError):
        prepared.prepare("DROP TABLE x", PARSER)
    with pytest.raises(sql.SqlError):
        prepared.prepare("SELECT 1; SELECT 2", PARSER)


def execute_body(types: list[int], values: bytes, nulls: int = 0) -> bytes:
    n = len(types)
    head = struct.pack("<IBI", 1, 0, 1) + nulls.to_bytes((n + 7) // 8, "little") + b"\x01"
    return head + b"".join(struct.pack("<BB", t, 0) for t in types) + values


def test_parameters_become_literals():
    stmt = prepared.prepare(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? "
        "AND TABLE_NAME = ? LIMIT ?",
        PARSER,
    )
    body = execute_body(
        [ColumnType.VAR_STRING, ColumnType.VAR_STRING, ColumnType.LONGLONG],
        lenenc_str("it's") + lenenc_str("a\\b") + struct.pack("<q", 5),
    )
    text = prepared.execute_text(stmt, body)
    assert text.endswith("TABLE_SCHEMA = 'it\\'s' AND TABLE_NAME = 'a\\\\b' LIMIT 5")
    sql.parse(text)
    # The types stay bound: a later EXECUTE may send the values only, and NULLs in the bitmap.
    again = (
        struct.pack("<IBI", 1, 0, 1) + b"\x02" + b"\x00" + lenenc_str("x") + struct.pack("<q", 1)
    )
    assert "TABLE_NAME = NULL" in prepared.execute_text(stmt, again)


def test_binary_rows():
    columns = [Column("a"), Column("n", ColumnType.LONGLONG, flags=UNSIGNED_FLAG), Column("z")]
    assert binary_row(columns, ["x", 7, None]) == (
        b"\x00" + bytes([1 << 4]) + lenenc_str("x") + struct.pack("<Q", 7)
    )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_malformed_execute_bodies_give_a_clean_error(body):
    stmt = prepared.prepare(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", PARSER
    )
    try:
        prepared.execute_text(stmt, body)
    except sql.SqlError:
        pass


def _typed(type_: int, flags: int = 0) -> Column:
    return Column("c", type_, flags=flags)


@pytest.mark.parametrize(
    ("column", "text", "binary"),
    [
        (_typed(ColumnType.TINY), b"-128", b"\x80"),
        (_typed(ColumnType.TINY, UNSIGNED_FLAG), b"255", b"\xff"),
        (_typed(ColumnType.YEAR, UNSIGNED_FLAG), b"2155", struct.pack("<H", 2155)),
        (_typed(ColumnType.INT24), b"-8388608", struct.pack("<i", -8388608)),
        (_typed(ColumnType.LONGLONG, UNSIGNED_FLAG), b"18446744073709551615", b"\xff" * 8),
        (_typed(ColumnType.FLOAT), b"0.1", struct.pack("<f", 0.1)),
        (_typed(ColumnType.DOUBLE), b"1e-300", struct.pack("<d", 1e-300)),
        (_typed(ColumnType.NEWDECIMAL), b"-1.50", lenenc_str(b"-1.50")),
        (_typed(ColumnType.DATE), b"2020-03-01", bytes.fromhex("04e4070301")),
        (_typed(ColumnType.DATE), b"0000-00-00", b"\x00"),
        (_typed(ColumnType.DATETIME), b"2026-01-01 00:00:00", bytes.fromhex("04ea070101")),
        (_typed(ColumnType.DATETIME), b"2026-01-01 00:00:00.000000", bytes.fromhex("04ea070101")),
        (
            _typed(ColumnType.TIMESTAMP),
            b"1970-01-01 00:00:01.500",
            bytes.fromhex("0bb20701010000 01") + struct.pack("<I", 500000),
        ),
        (_typed(ColumnType.DATETIME), b"9999-12-31 23:59:59", bytes.fromhex("070f270c1f173b3b")),
        (_typed(ColumnType.TIME), b"00:00:00", b"\x00"),
        (_typed(ColumnType.TIME), b"-838:59:59", bytes.fromhex("08 01 22000000 16 3b 3b")),
        (
            _typed(ColumnType.TIME),
            b"-00:00:01.000001",
            bytes.fromhex("0c 01 00000000 00 00 01 01000000"),
        ),
        (_typed(ColumnType.VAR_STRING), b"h\xc3\xa9", lenenc_str(b"h\xc3\xa9")),
    ],
)
def test_binary_values_from_text_as_mariadb_stores_them(column, text, binary):
    """Protocol_binary (sql/protocol.cc): integers at their width, IEEE floats, temporal values
    in their shortest form (a zero time part drops it, a zero fraction too)."""
    assert BinaryRows([column])(lenenc_str(text)) == b"\x00\x00" + binary


def test_binary_rows_null_bitmap_from_offset_two():
    columns = [_typed(ColumnType.LONG)] * 9
    row = b"".join(b"\xfb" if i in (0, 6, 8) else lenenc_str(str(i).encode()) for i in range(9))
    out = BinaryRows(columns)(row)
    assert out[:3] == bytes([0x00, 0b100, 0b101])  # columns 0, 6, 8 at bits 2, 8, 10
    assert out[3:] == b"".join(struct.pack("<i", i) for i in (1, 2, 3, 4, 5, 7))


def test_long_fields_pass_through():
    text = b"x" * 70000
    assert BinaryRows([_typed(ColumnType.BLOB)])(lenenc_str(text)) == b"\x00\x00" + lenenc_str(text)
