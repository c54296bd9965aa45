"""The compiled per-row steps of a snapshot read (cdc/compiled.py; test_compiled runs this file
as plain Python too): a DN page's rows split into key and data as the text protocol spells
them, rows framed as packets exactly as `frame` frames each, and the values of a row image
from the global binlog located as the codec decodes them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.binlog.constants import ColumnType
from cdc.binlog.events import encode_event
from cdc.binlog.fde import FormatDescription
from cdc.binlog.query import QueryEvent
from cdc.binlog.row_image import decode_image, decode_value, encode_image
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column, TableMapEvent
from cdc.protocol.packets import MAX_CHUNK, frame
from dumper.server.handlers import SqlError
from dumper.server.wire.row_packets import frame_rows
from read_path.changes import ChangedKeys
from read_path.first_images import Image, Shape, layout, rows
from read_path.image_walk import value_starts
from read_path.page_rows import keyed_packets, keyed_rows
from read_path.values import split_fields, text_row
from tests.cdc.binlog.strategies import columns_and_rows

INTS = [0, 7, -7, 10**17, -(10**18) + 1, 10**18, 2**63 - 1, -(2**63), 2**64 - 1]


def reference(page: list[bytes], nkey: int, integer_key: bool) -> list:
    out = []
    for row in page:
        keys, at = split_fields(row, nkey)
        out.append((tuple(int(k) for k in keys) if integer_key else tuple(keys), row[at:]))
    return out


@pytest.mark.parametrize("nkey", [1, 2])
def test_integer_keys_of_any_size(nkey):
    page = [text_row([str(k).encode()] * nkey + [b"data", None, b"x" * 300]) for k in INTS]
    assert keyed_rows(page, nkey, True) == reference(page, nkey, True)
    assert keyed_rows(page, nkey, True)[3] == (
        (10**17,) * nkey,
        text_row([b"data", None, b"x" * 300]),
    )


def test_text_keys_keep_their_bytes_whatever_their_length():
    page = [text_row([b"k" * n, b"v"]) for n in (0, 1, 250, 251, 70_000)]
    assert keyed_rows(page, 1, False) == reference(page, 1, False)
    assert keyed_rows([], 1, False) == []


def test_a_null_key_is_refused():
    with pytest.raises(ValueError):
        keyed_rows([text_row([None, b"v"])], 1, True)


def stream(rows: list[bytes], last: bytes) -> bytes:
    out, seq = b"", 3
    for payload in [*rows, last]:
        data, seq = frame(payload, seq)
        out += data
    return out


EOF_PACKET = b"\xfe\x00\x00\x22\x00"


@pytest.mark.parametrize("cut", [0, 1, 3, 4, 5, 17, 1000])
def test_packets_of_a_result_cut_and_keyed_in_one_pass(cut):
    """A page's rows as the DN's stream brings them, in any cut: every whole row taken, the
    rest left for the next read; the EOF (or an ERR) ends them and is handed back."""
    page = [text_row([str(k).encode(), b"v" * (k % 300), None]) for k in INTS + list(range(200))]
    data = stream(page, EOF_PACKET)
    out: list = []
    pos, last = keyed_packets(data[:cut], 0, 1, True, out)
    assert last is None and pos <= cut
    rest = data[pos:]
    pos, last = keyed_packets(rest, 0, 1, True, out)
    assert (out, last, pos) == (reference(page, 1, True), EOF_PACKET, len(rest))


def test_an_error_ends_the_rows_and_a_split_packet_is_left_to_the_caller():
    err = b"\xff\x15\x04#HY000boom"
    rows = [text_row([b"1", b"a"]), text_row([b"2", b"b"])]
    out: list = []
    assert keyed_packets(stream(rows, err), 0, 1, True, out) == (len(stream(rows, err)), err)
    assert [key for key, _ in out] == [(1,), (2,)]
    big = frame(text_row([b"3", b"x" * MAX_CHUNK]), 5)[0]
    data = stream(rows, rows[0]) + big
    out = []
    pos, last = keyed_packets(data, 0, 1, True, out)
    assert (data[pos : pos + 3], last, len(out)) == (b"\xff\xff\xff", None, 3)


def test_rows_framed_as_frame_frames_each_with_wrapping_ids():
    rows = [b"", b"a", b"x" * 300, *(bytes([i % 256]) * i for i in range(300))]
    framed, n, seq = frame_rows(rows, 2, len(rows), 250)
    expected, s = b"", 250
    for row in rows[2:]:
        data, s = frame(row, s)
        expected += data
    assert (bytes(framed), n, seq) == (expected, len(rows) - 2, s)
    assert frame_rows(rows, 3, 3, 9) == (frame_rows(rows, 3, 3, 9)[0], 0, 9)


def test_a_row_that_must_be_split_stops_the_batch():
    rows = [b"a", b"b", bytes(MAX_CHUNK), b"c"]
    framed, n, seq = frame_rows(rows, 0, 4, 0)
    assert (bytes(framed), n, seq) == (frame(b"a", 0)[0] + frame(b"b", 1)[0], 2, 2)
    assert frame_rows(rows, 2, 4, 5)[1:] == (0, 5)


# -- the scan of the global binlog: a row image's values located, none decoded -------------------
@settings(max_examples=200, deadline=None)
@given(columns_and_rows, st.integers(0, 3))
def test_value_starts_finds_every_value_of_every_type(cols_values, skip):
    columns = [c for c, _ in cols_values]
    row = [v for _, v in cols_values]
    present = (True,) * len(columns)
    data = b"\x07" * skip + encode_image(columns, present, row) * 2
    fixed, prefix = layout(columns)
    starts = [0] * len(columns)
    view = memoryview(data)
    pos, ends = skip, []
    for _ in range(2):  # images follow one another: each ends where the next starts
        expected, end = decode_image(columns, present, view, pos)
        assert value_starts(data, pos, fixed, prefix, starts) == end
        got = [
            None if at < 0 else decode_value(c, view, at)[0]
            for c, at in zip(columns, starts, strict=True)
        ]
        assert got == expected
        pos = end
        ends.append(end)
    assert pos == len(data)
    with pytest.raises(ValueError):  # an image cut short
        value_starts(data[:-1], ends[0], fixed, prefix, starts)


def test_changed_keys_keep_the_first_before_image_and_decode_only_keys():
    columns = [
        Column(ColumnType.LONGLONG),
        Column(ColumnType.VARCHAR, 400),
        Column(ColumnType.LONG),
    ]
    changes = ChangedKeys(None, ("binlog.000001", 4), ("d", "t"), [0], tuple, 3)  # type: ignore[arg-type]
    shape = (columns, layout(columns))

    def event(type_code, items):
        return RowsEvent.from_rows(type_code, 1, columns, items)

    table = changes.table
    rows(table, event(23, [[5, b"new", None]]), *shape, "w")  # inserted: absent at P
    rows(
        table,
        event(24, [([1, b"one", 1], [1, b"uno", 2]), ([2, b"two", None], [9, b"two", 2])]),
        *shape,
        "u",
    )
    rows(table, event(24, [([1, b"uno", 2], [1, b"eins", 3])]), *shape, "u2")  # not the first
    rows(table, event(25, [[3, b"three", 3], [5, b"new", None]]), *shape, "d")
    assert changes.added == [(5,), (1,), (2,), (9,), (3,)]
    states = {k: None if v is None else _decoded(v) for k, v in changes.changes.items()}
    assert states == {
        (5,): None,
        (1,): [1, b"one", 1],
        (2,): [2, b"two", None],
        (9,): None,  # a key an UPDATE moved a row to was absent at P
        (3,): [3, b"three", 3],
    }


def test_changed_keys_read_raw_events_of_their_table_only():
    """`_event` reads table ids, a TABLE_MAP's names and a QUERY's first word in place: the
    table's rows count (under a map seen once or again, the same), another table's do not,
    even under an id that was the table's; DDL on the table fails the read, other DDL and
    BEGIN do not."""
    columns = [Column(ColumnType.LONGLONG), Column(ColumnType.VARCHAR, 400)]
    changes = ChangedKeys(None, ("binlog.000001", 4), ("d", "t"), [0], tuple, 2)  # type: ignore[arg-type]
    changes._fde = FormatDescription()

    def feed(body) -> None:
        changes._event(encode_event(body), "here")

    def rows(table_id: int, key: int) -> RowsEvent:
        return RowsEvent.from_rows(24, table_id, columns, [([key, b"a"], [key, b"b"])])

    feed(QueryEvent(b"BEGIN"))
    feed(TableMapEvent.from_columns(7, "d", "t", columns))
    feed(rows(7, 1))
    feed(TableMapEvent.from_columns(8, "d", "t", columns))  # the same map, another id
    feed(rows(8, 2))
    feed(TableMapEvent.from_columns(7, "d", "t2", columns))  # id 7 is now another table's
    feed(rows(7, 3))
    feed(TableMapEvent.from_columns(9, "dd", "t", columns))
    feed(rows(9, 4))
    feed(QueryEvent(b"  create table d.other (id int)", db=b"d"))
    assert changes.added == [(1,), (2,)]
    assert _decoded(changes.changes[(2,)]) == [2, b"a"]  # type: ignore[arg-type]
    with pytest.raises(SqlError, match="changed by DDL"):
        feed(QueryEvent(b"\n ALTER TABLE t ADD COLUMN x INT", db=b"d"))


def test_changed_keys_cross_a_ddl_the_read_foresaw_in_its_shape():
    """A read as of a point before `ADD COLUMN x FIRST` (past_shape.py): rows before it are
    keyed as the shards' are, rows after it by the key where the new shape has it, and their
    images say where the read's columns are; a DDL not foreseen fails the read."""
    old = [Column(ColumnType.LONGLONG), Column(ColumnType.VARCHAR, 400)]
    new = [Column(ColumnType.LONG), *old]
    ddl = b"ALTER TABLE t ADD COLUMN x INT FIRST"
    later = [Shape(ddl.decode(), 3, [1, 2])]
    changes = ChangedKeys(None, ("binlog.000001", 4), ("d", "t"), [0], tuple, 2, later)  # type: ignore[arg-type]
    changes._fde = FormatDescription()

    def feed(body) -> None:
        changes._event(encode_event(body), "here")

    feed(TableMapEvent.from_columns(7, "d", "t", old))
    feed(RowsEvent.from_rows(24, 7, old, [([1, b"a"], [1, b"b"])]))
    feed(QueryEvent(ddl, db=b"d"))
    feed(TableMapEvent.from_columns(7, "d", "t", new))
    feed(RowsEvent.from_rows(24, 7, new, [([5, 2, b"c"], [6, 2, b"d"])]))
    assert changes.added == [(1,), (2,)]
    first, second = changes.changes[(1,)], changes.changes[(2,)]
    assert first is not None and first.picks is None and _decoded(first) == [1, b"a"]
    assert second is not None and second.picks == [1, 2] and _decoded(second) == [5, 2, b"c"]
    with pytest.raises(SqlError, match="changed by DDL"):
        feed(QueryEvent(b"ALTER TABLE t DROP COLUMN x", db=b"d"))


def _decoded(image: Image) -> list:
    """A kept before-image's values, as the codec decodes them."""
    present = [True] * len(image.columns)
    values = decode_image(image.columns, present, memoryview(image.data), 0)[0]
    assert image.values() == values
    return values
