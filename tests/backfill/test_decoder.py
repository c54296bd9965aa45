"""The backfill's scan of the global binlog decodes changed keys with the read path's
`FirstImages` (the snapshot read's decoder): each key's first state after the snapshot, rows
converted as PyMySQL reads them, keys of other tables and BEGIN ignored, DDL on a chosen table
and partial images refused. Pure: encoded events, no cluster, no Spark."""

from __future__ import annotations

import pytest

from backfill.columns import ColumnSpec
from backfill.errors import BackfillError
from backfill.global_binlog import _Decoder
from backfill.tables import TableSpec
from cdc.binlog.constants import ColumnType
from cdc.binlog.events import encode_event
from cdc.binlog.fde import FormatDescription
from cdc.binlog.query import QueryEvent
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column, TableMapEvent

COLUMNS = [Column(ColumnType.LONGLONG), Column(ColumnType.VARCHAR, 400)]
SPEC = TableSpec(
    "d",
    "t",
    (ColumnSpec("id", "bigint(20)"), ColumnSpec("name", "varchar(100)", "utf8mb4")),
    ("id",),
    "CREATE TABLE t (id bigint primary key, name varchar(100))",
)


def events(*bodies) -> list[bytes]:
    return [encode_event(b) for b in bodies]


def test_first_state_of_each_changed_key_converted_as_pymysql_reads_it():
    decoder = _Decoder([SPEC])
    fde = FormatDescription()
    decoder.feed(
        events(
            QueryEvent(b"BEGIN"),
            TableMapEvent.from_columns(7, "d", "t", COLUMNS),
            RowsEvent.from_rows(30, 7, COLUMNS, [[5, b"new"]]),  # created: absent at T
            RowsEvent.from_rows(31, 7, COLUMNS, [([1, b"one"], [2, b"two"])]),
            TableMapEvent.from_columns(8, "d", "other", COLUMNS),
            RowsEvent.from_rows(32, 8, COLUMNS, [[3, b"x"]]),  # another table
        ),
        fde,
        100,
    )
    decoder.feed(
        events(
            TableMapEvent.from_columns(7, "d", "t", COLUMNS),
            RowsEvent.from_rows(31, 7, COLUMNS, [([1, b"uno"], [1, b"eins"])]),  # not the first
            RowsEvent.from_rows(32, 7, COLUMNS, [[4, b"four"]]),
        ),
        fde,
        101,
    )
    assert decoder.patches() == {
        "d.t": {(5,): None, (1,): (1, "one"), (2,): None, (4,): (4, "four")}
    }


def test_ddl_on_a_chosen_table_fails_the_backfill():
    decoder = _Decoder([SPEC])
    decoder.feed(events(QueryEvent(b"CREATE TABLE d.x (id int)", db=b"d")), FormatDescription(), 1)
    with pytest.raises(BackfillError, match="changed by DDL at TSO 2"):
        decoder.feed(
            events(QueryEvent(b"ALTER TABLE t ADD COLUMN y INT", db=b"d")), FormatDescription(), 2
        )
