"""The changes scan reads a changed row's key (`first_images.key_reader`): an integer column
unpacked where `value_starts` found it gives the codec's value (every width, signed and
unsigned, at each end of its range; composite keys; NULL), a key of another type goes through
the codec; and `rows` keeps the same map whichever reader it uses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as hs

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.row_image import decode_value, encode_image
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column
from read_path.first_images import TableChanges, key_reader, layout, rows
from read_path.image_walk import value_starts

WIDTHS = {T.TINY: 1, T.SHORT: 2, T.LONG: 4, T.LONGLONG: 8}
PAD = Column(T.VARCHAR, meta=400)


def _integer(kind: int, unsigned: bool):
    bits = 8 * WIDTHS[kind]
    lo, hi = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return hs.one_of(hs.sampled_from([lo, hi, 0]), hs.integers(lo, hi))


@hs.composite
def keyed_row(draw):
    """(columns, the key's positions, a row): one to three integer key columns among others."""
    nkey = draw(hs.integers(1, 3))
    columns, row = [PAD], [b"pad"]
    for _ in range(nkey):
        kind = draw(hs.sampled_from(sorted(WIDTHS)))
        unsigned = draw(hs.booleans())
        columns.append(Column(kind, unsigned=unsigned))
        row.append(draw(hs.none() | _integer(kind, unsigned)))
    return columns, list(range(1, nkey + 1)), row


def _codec(columns, key, data, starts):
    view = memoryview(data)
    return [None if starts[i] < 0 else decode_value(columns[i], view, starts[i], i)[0] for i in key]


@settings(max_examples=300, deadline=None)
@given(keyed_row())
def test_an_integer_key_is_the_codecs_value(drawn):
    columns, key, row = drawn
    data = encode_image(columns, [True] * len(columns), row)
    fixed, prefix = layout(columns)
    starts = [0] * len(columns)
    value_starts(data, 0, fixed, prefix, starts)
    assert key_reader(columns, key)(data, memoryview(data), starts) == _codec(
        columns, key, data, starts
    )


def test_a_key_of_another_type_goes_through_the_codec():
    columns = [Column(T.VARCHAR, meta=40), Column(T.LONG), PAD]
    data = encode_image(columns, [True] * 3, [b"abc", 7, b"x"])
    fixed, prefix = layout(columns)
    starts = [0] * 3
    value_starts(data, 0, fixed, prefix, starts)
    assert key_reader(columns, [0, 1])(data, memoryview(data), starts) == [b"abc", 7]


def test_an_update_keeps_the_first_before_image_and_a_moved_key():
    """An update of the same key twice keeps the first before-image; one that moves a key
    marks the new key absent at the start."""
    columns = [Column(T.LONGLONG), Column(T.LONG), PAD]
    present = [True] * 3

    def image(k, a):
        return encode_image(columns, present, [k, a, b"p"])

    data = image(1, 10) + image(1, 11) + image(1, 11) + image(1, 12) + image(2, 5) + image(3, 5)
    body = RowsEvent(31, 1, 0, 3, (True,) * 3, (True,) * 3, data)
    table = TableChanges("db", "t", [0], tuple, 3)
    rows(table, body, columns, layout(columns), "here", key_reader(columns, [0]))
    assert table.added == [(1,), (2,), (3,)]
    assert table.changes[(1,)].data == image(1, 10) and table.changes[(3,)] is None
    assert table.changes[(2,)].data == image(2, 5)
