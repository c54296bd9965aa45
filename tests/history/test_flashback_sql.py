"""The SQL spelling of inverse changes (pure): literals of every decoded value type, and the
statements keyed by the primary key with the expected row as a guard."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.row_image import Date, DateTime, Timestamp
from cdc.binlog.table_map import Column
from history.flashback import RowChange, TableShape, _inverse, _inverse_type
from history.flashback_sql import literal, statement


@pytest.mark.parametrize(
    ("value", "spelled"),
    [
        (None, "NULL"),
        (-5, "-5"),
        (Decimal("12.50"), "12.50"),
        (0.5, "0.5"),
        (b"plain text", "'plain text'"),
        (b"it's", "X'69742773'"),
        (b"a\\b", "X'615c62'"),
        ("é".encode(), "X'c3a9'"),
        (b"", "''"),
        (Timestamp(1700000000, 5), "FROM_UNIXTIME(1700000000.000005)"),
        (Timestamp(0), "'0000-00-00 00:00:00'"),
        (DateTime(2026, 1, 2, 3, 4, 5, 6), "'2026-01-02 03:04:05.000006'"),
        (Date(0, 0, 0), "'0000-00-00'"),
        (-dt.timedelta(hours=30, seconds=2, microseconds=500000), "'-30:00:02.500000'"),
    ],
)
def test_literals(value, spelled):
    assert literal(value) == spelled


SHAPE = TableShape(
    "db",
    "t",
    7,
    b"",
    [Column(T.LONGLONG, name=b"id"), Column(T.LONG, name=b"v"), Column(T.FLOAT, name=b"f")],
    [0],
)


def test_statements_are_keyed_and_guarded():
    assert statement(SHAPE, RowChange("write", None, [1, 2, 0.5])) == (
        "INSERT INTO `db`.`t` (`id`, `v`, `f`) VALUES (1, 2, 0.5)"
    )
    assert statement(SHAPE, RowChange("delete", [1, None, 0.5], None)) == (
        "DELETE FROM `db`.`t` WHERE `id` = 1 AND `v` IS NULL"  # no FLOAT in the guard
    )
    assert statement(SHAPE, RowChange("update", [1, 3, 0.5], [1, 2, 0.5])) == (
        "UPDATE `db`.`t` SET `v` = 2 WHERE `id` = 1 AND `v` = 3"
    )


def test_inverse_swaps_kinds_and_images():
    assert [_inverse_type(c) for c in (23, 24, 25, 30, 31, 32)] == [25, 24, 23, 32, 31, 30]
    up = _inverse(RowChange("update", [1], [2], b"B", b"A"))
    assert (up.kind, up.before, up.after, up.before_bytes, up.after_bytes) == (
        "update",
        [2],
        [1],
        b"A",
        b"B",
    )
    assert _inverse(RowChange("write", None, [1], b"", b"A")).kind == "delete"
    assert _inverse(RowChange("delete", [1], None, b"D", b"")).after_bytes == b"D"
