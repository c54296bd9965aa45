"""The one SQL literal renderer (cdc/sql_literal.py): every value type, the two spellings of
bytes, the escapes read back by both of our SQL readers (the server's lexer and the CN's
tokenizer), and each caller's choice of spelling."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cdc.binlog.row_image import Date, DateTime, Timestamp
from cdc.cn_protocol import sql as cn_sql
from cdc.cn_protocol.catalogue import partition_of
from cdc.cn_protocol.errors import RoutingError
from cdc.cn_protocol.sql_text import literal_value
from cdc.cn_protocol.sql_text import tokenize as cn_tokenize
from cdc.sql_literal import BytesAs, LiteralError, sql_literal
from dumper.server.handlers import SqlError
from dumper.server.sql.lexer import tokenize as server_tokenize
from dumper.server.wire import prepared
from history import flashback_sql
from read_path.request import Compare
from read_path.where import to_sql

EVERY_ESCAPE = "a\\b'c\"d\0e\nf\rg\x1ah"


@pytest.mark.parametrize(
    ("value", "spelled"),
    [
        (None, "NULL"),
        (True, "1"),
        (False, "0"),
        (-5, "-5"),
        (2**64 - 1, "18446744073709551615"),
        (Decimal("12.50"), "12.50"),
        (Decimal("-0.001"), "-0.001"),
        (0.5, "0.5"),
        (1e20, "1e+20"),
        (-2.5e-7, "-2.5e-07"),
        ("", "''"),
        ("plain", "'plain'"),
        (EVERY_ESCAPE, "'a\\\\b\\'c\\\"d\\0e\\nf\\rg\\Zh'"),
        ("% _ \t é 😀", "'% _ \t é 😀'"),  # LIKE wildcards and tabs are not escaped
        (b"plain text", "X'706c61696e2074657874'"),
        (b"\x00\xff'", "X'00ff27'"),
        (b"", "X''"),
        (bytearray(b"ab"), "X'6162'"),
        (memoryview(b"ab"), "X'6162'"),
        (dt.datetime(2026, 1, 2, 3, 4, 5), "'2026-01-02 03:04:05'"),
        (dt.datetime(2026, 1, 2, 3, 4, 5, 6), "'2026-01-02 03:04:05.000006'"),
        (dt.date(999, 12, 31), "'0999-12-31'"),
        (dt.time(23, 59, 58, 120000), "'23:59:58.120000'"),
        (dt.time(0, 0), "'00:00:00'"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), "'838:59:59'"),
        (-dt.timedelta(seconds=1), "'-00:00:01'"),
        (-dt.timedelta(hours=30, seconds=2, microseconds=500000), "'-30:00:02.500000'"),
        (Timestamp(1700000000, 5), "FROM_UNIXTIME(1700000000.000005)"),
        (Timestamp(1700000000), "FROM_UNIXTIME(1700000000.000000)"),
        (Timestamp(0), "'0000-00-00 00:00:00'"),
        (DateTime(2026, 1, 2, 3, 4, 5, 6), "'2026-01-02 03:04:05.000006'"),
        (DateTime(0, 0, 0), "'0000-00-00 00:00:00'"),
        (Date(0, 0, 0), "'0000-00-00'"),
        ({"b", "a"}, "'a,b'"),
        (frozenset(), "''"),
    ],
)
def test_every_type(value, spelled):
    assert sql_literal(value) == spelled


@pytest.mark.parametrize(
    ("value", "spelled"),
    [
        (b"plain text", "'plain text'"),
        (b"it's", "X'69742773'"),  # a quote or backslash: hex, the same in any sql_mode
        (b"a\\b", "X'615c62'"),
        (b"tab\t", "X'74616209'"),
        ("é".encode(), "X'c3a9'"),
        (b"", "''"),
    ],
)
def test_bytes_plain_or_hex(value, spelled):
    assert sql_literal(value, bytes_as=BytesAs.PLAIN_OR_HEX) == spelled


@pytest.mark.parametrize(
    "value",
    [
        float("inf"),
        float("-inf"),
        float("nan"),
        Decimal("NaN"),
        Decimal("-Infinity"),
        object(),
        (1,),
    ],
)
def test_no_literal(value):
    with pytest.raises(LiteralError):
        sql_literal(value)


@pytest.mark.parametrize("text", ["", "plain", EVERY_ESCAPE, "\\'", "''", "'\\", "é 😀 %s"])
def test_strings_read_back_by_both_readers(text):
    spelled = sql_literal(text)
    (token,) = [t for t in server_tokenize("SELECT " + spelled) if t.kind == "str"]
    assert token.value == text
    (token,) = cn_tokenize(spelled)
    assert literal_value(token) == text


@pytest.mark.parametrize("data", [b"", b"\x00\xff'", b"plain", "é".encode()])
def test_bytes_route_as_bytes(data):
    """The CN hashes a shard key by its bytes: X'..' reads back as those bytes, and a plain
    string (flashback's spelling of printable ASCII) as text with the same bytes."""
    for bytes_as in BytesAs:
        (token,) = cn_tokenize(sql_literal(data, bytes_as=bytes_as))
        value = literal_value(token)
        assert partition_of(value, 7) == partition_of(data, 7)


# -- each caller's choice ---------------------------------------------------------------------------
def test_the_cn_spells_bytes_in_hex_and_refuses_what_has_no_literal():
    assert cn_sql.render("SELECT %s, %s", (b"a", "it's")) == "SELECT X'61', 'it\\'s'"
    with pytest.raises(RoutingError, match="cannot pass a float"):
        cn_sql.literal(float("nan"))


def test_where_pushed_down():
    """Was `'a''b'` and a raw newline before the one renderer: the same text to MariaDB."""
    assert to_sql(Compare("name", "=", "a'b\n")) == "`name` = 'a\\'b\\n'"
    assert to_sql(Compare("x", "<", 1.5e-7)) == "`x` < 1.5e-07"


def test_flashback_is_the_same_in_any_sql_mode():
    for value in (b"it's", b"a\\b", b"plain", DateTime(2026, 1, 2), Timestamp(5)):
        assert "\\" not in flashback_sql.literal(value)
    assert flashback_sql.literal(b"plain") == "'plain'"


def test_prepared_binds_bytes_as_text_our_parser_reads():
    """Our own parser reads no X'..': bytes are decoded first, escaped like any string."""
    assert prepared.literal(b"it's\n") == "'it\\'s\\n'"
    assert prepared.literal(3.25) == "3.25" and prepared.literal(True) == "1"
    with pytest.raises(SqlError, match="Incorrect arguments"):
        prepared.literal(float("inf"))
