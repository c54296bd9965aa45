"""Property tests: build -> parse -> equal for headers, QUERY, TABLE_MAP and rows with random
values of every column type; plus the exact sizes of the output file header."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.binlog import checksum
from cdc.binlog.constants import EventFlag
from cdc.binlog.events import (
    PreviousGtidsEvent,
    RotateEvent,
    RowsQueryEvent,
    XidEvent,
    cts_mark,
    decode_event,
    encode_event,
    parse_cts,
)
from cdc.binlog.fde import MYSQL57_POST_HEADER_LENS, FormatDescription, mysql57_fde
from cdc.binlog.header import EventHeader
from cdc.binlog.query import QueryEvent, build_status_vars, parse_status_vars
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column, TableMapEvent
from tests.cdc.binlog.strategies import column_and_value, columns_and_rows

FDE = mysql57_fde()
u32 = st.integers(0, 2**32 - 1)


@given(u32, st.integers(0, 255), u32, u32, u32, st.integers(0, 0xFFFF))
def test_header_roundtrip(ts, code, sid, size, pos, flags):
    h = EventHeader(ts, code, sid, size, pos, flags)
    assert EventHeader.unpack(h.pack()) == h


def test_mysql57_fde_layout():
    ev = encode_event(FDE, flags=EventFlag.BINLOG_IN_USE)
    assert len(ev) == 119 and len(MYSQL57_POST_HEADER_LENS) == 38
    checksum.verify(ev)  # CRC computed as if in-use were clear ...
    cleared = bytearray(ev)
    cleared[17] &= 0xFE
    checksum.verify(cleared)  # ... so clearing the flag in place keeps it valid
    parsed = FormatDescription.parse(ev[19:])
    assert parsed == FDE and parsed.post_header_len(19) == 8 and parsed.post_header_len(30) == 10
    assert len(encode_event(PreviousGtidsEvent())) == 31  # 123 + 31 = 154


@given(st.binary(max_size=300), st.binary(max_size=64), u32, u32, st.integers(0, 0xFFFF))
def test_query_roundtrip(query, db, thread_id, exec_time, err):
    q = QueryEvent(
        query,
        db,
        build_status_vars(sql_mode=exec_time, flags2=thread_id),
        thread_id,
        exec_time,
        err,
    )
    ev = encode_event(q, timestamp=1, server_id=2)
    got = decode_event(ev, FDE).body
    assert got == q
    assert set(parse_status_vars(got.status_vars)) == {0, 1, 3, 4, 6}
    assert got.charset == (45, 45, 45)


@given(
    st.lists(column_and_value(), min_size=1, max_size=20), st.integers(0, 2**48 - 1), st.booleans()
)
def test_table_map_roundtrip(cols_values, table_id, names):
    cols = [
        Column(
            c.type,
            c.meta,
            nullable=bool(i % 2),
            unsigned=c.unsigned,
            name=b"c%d" % i if names else None,
            collation=c.collation,
            enum_values=c.enum_values,
            set_values=c.set_values,
        )
        for i, (c, _) in enumerate(cols_values)
    ]
    tm = TableMapEvent.from_columns(table_id, "db", "tbl", cols, primary_key=[0], with_names=names)
    got = decode_event(encode_event(tm), FDE).body
    assert got == tm
    for a, b in zip(got.columns(), cols, strict=True):
        assert (a.type, a.meta, a.nullable, a.name) == (b.type, b.meta, b.nullable, b.name)
        assert a.unsigned == b.unsigned
        assert a.enum_values == b.enum_values and a.set_values == b.set_values


@settings(max_examples=150)
@given(columns_and_rows, st.sampled_from([23, 24, 25, 30, 31, 32]), st.integers(1, 3))
def test_rows_roundtrip(cols_values, type_code, nrows):
    cols = [c for c, _ in cols_values]
    row = [v for _, v in cols_values]
    rows = [(row, row)] * nrows if type_code in (24, 31) else [row] * nrows
    ev = RowsEvent.from_rows(
        type_code, 42, cols, rows, extra_data=b"\x00\x01" if type_code >= 30 else None
    )
    raw = encode_event(ev, type_code=type_code)
    got = decode_event(raw, FDE).body
    assert got == ev
    decoded = got.decode_rows(cols)
    expected = (
        [(list(b), list(a)) for b, a in rows] if type_code in (24, 31) else [list(r) for r in rows]
    )
    assert decoded == expected


@given(st.integers(0, 2**64 - 1))
def test_cts_mark(tso):
    ev = encode_event(cts_mark(tso))
    assert ev[17] & 0x80  # LOG_EVENT_IGNORABLE_F, or MariaDB refuses type 29
    body = decode_event(ev, FDE).body
    assert isinstance(body, RowsQueryEvent) and body.cts == tso and parse_cts(body.query) == tso


@given(st.binary(min_size=1, max_size=40), st.integers(0, 2**64 - 1))
def test_simple_events(name, n):
    for body in (RotateEvent(name, n), XidEvent(n)):
        assert decode_event(encode_event(body), FDE).body == body
