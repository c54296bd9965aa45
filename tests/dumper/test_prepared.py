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
