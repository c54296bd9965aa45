"""The splitter (dumper/pipeline/stream_split.py) and the router (cdc/streams.py) on recorded
MariaDB transactions and on constructed ones: each stream gets, in the merged order and with the
transaction's key, exactly the events of its tables; together the streams hold every event."""

from __future__ import annotations

import zlib

import pytest

from cdc.binlog.constants import EventType, RowsFlag
from cdc.config import ConfigError, DumperConfig
from cdc.keys import GlobalKey
from cdc.streams import StreamRouter, stream_hash, stream_server_uuid
from dumper.pipeline.stream_split import StreamSplitter
from merge_joint.merger import Transaction
from merge_source.classifier import table_name
from merge_source.fragment import Fragment, FragmentKind, Statement
from merge_source.processor import SourceProcessor
from tests.merge_source.test_recorded import DN, feed_all

ROWS = {EventType.WRITE_ROWS_V1, EventType.UPDATE_ROWS_V1, EventType.DELETE_ROWS_V1}
CRC_SHOP_ORDERS = zlib.crc32(b"shop.orders")
ROWS |= {EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS}


@pytest.fixture(scope="module")
def recorded() -> list[Transaction]:
    fragments = feed_all(SourceProcessor(DN, wait_for_start=True)).fragments()
    return [Transaction(f.global_key, f.txn_id, f.kind, [f], f.statements) for f in fragments]


def tables_of(txn: Transaction) -> list[tuple[bytes, bytes]]:
    """The table of every TABLE_MAP and rows event, in order (rows by their statement's map)."""
    out = []
    for st in txn.statements:
        ids = {}
        for e in st.events:
            if e[4] == EventType.TABLE_MAP:
                ids[bytes(e[19:25])] = table_name(e)
                out.append(table_name(e))
            elif e[4] in ROWS:
                out.append(ids[bytes(e[19:25])])
    return out


def test_the_hash_is_stable_across_processes():
    # CRC32: fixed values, whatever PYTHONHASHSEED says (Python's hash() of str is salted)
    assert stream_hash("shop.orders") == CRC_SHOP_ORDERS
    router = StreamRouter(4)
    assert [router.stream_of(b"bank", b"accounts"), router.stream_of(b"shop", b"orders")] == [
        stream_hash("bank.accounts") % 4,
        stream_hash("shop.orders") % 4,
    ]
    by_db = StreamRouter(4, "database")
    assert by_db.stream_of(b"shop", b"orders") == by_db.stream_of(b"shop", b"items")


def test_a_pin_wins_over_the_hash():
    natural = StreamRouter(3).stream_of(b"shop", b"orders")
    pinned = (natural + 1) % 3
    router = StreamRouter(3, pinned={"shop.orders": pinned, "bank": 0})
    assert router.stream_of(b"shop", b"orders") == pinned
    assert router.stream_of(b"bank", b"anything") == 0
    with pytest.raises(ValueError):
        StreamRouter(2, pinned={"a.b": 2})


def test_config_checks_streams_and_pins():
    assert DumperConfig().streams == 1
    with pytest.raises(ConfigError, match="stream_by"):
        DumperConfig(streams=2, stream_by="column")
    with pytest.raises(ConfigError, match="stream_tables"):
        DumperConfig(streams=2, stream_tables={"a.b": 5})
    with pytest.raises(ConfigError, match="streams"):
        DumperConfig(streams=0)


def test_each_stream_has_its_own_server_uuid():
    cluster = "6c6b0e1e-0000-4000-8000-00000000cdc1"
    uuids = {stream_server_uuid(cluster, i) for i in range(4)}
    assert len(uuids) == 4 and cluster not in uuids
    assert stream_server_uuid(cluster, 1) == stream_server_uuid(cluster, 1)


def test_one_stream_gets_every_transaction_unchanged(recorded):
    (only,) = StreamSplitter(StreamRouter(1)).split(recorded)
    written = [
        t
        for t in recorded
        if t.kind in (FragmentKind.DATA, FragmentKind.LOCAL)
        and t.statements
        or t.kind is FragmentKind.DDL
        and t.fragments[0].markers
    ]
    assert only == written and all(a is b for a, b in zip(only, written, strict=True))


@pytest.mark.parametrize("streams", [2, 3, 5])
def test_streams_partition_the_events_by_table_in_merged_order(recorded, streams):
    router = StreamRouter(streams)
    parts = StreamSplitter(router).split(recorded)
    data = [t for t in recorded if t.kind in (FragmentKind.DATA, FragmentKind.LOCAL)]
    assert len(data) >= 5
    for i, part in enumerate(parts):
        keys = [t.key for t in part]
        assert keys == sorted(keys), "each stream keeps the merged order"
        for txn in part:
            if txn.kind is FragmentKind.DDL:
                continue
            assert txn.statements, "a stream gets no empty part"
            assert {router.stream_of(*t) for t in tables_of(txn)} == {i}
    for txn in data:
        got = sorted(
            tab for part in parts for t in part if t.key == txn.key for tab in tables_of(t)
        )
        assert got == sorted(tables_of(txn)), f"txn {txn.txn_id}: every event in one stream"


def _table_map(tid: int, db: bytes, table: bytes) -> bytes:
    body = tid.to_bytes(6, "little") + b"\0\0" + bytes([len(db)]) + db + b"\0"
    body += bytes([len(table)]) + table + b"\0" + b"\x01\x03\x00\x01"
    return _event(EventType.TABLE_MAP, body)


def _rows(tid: int, flags: int) -> bytes:
    return _event(
        EventType.WRITE_ROWS_V1,
        tid.to_bytes(6, "little") + flags.to_bytes(2, "little") + b"\x01\xff\x00\x01\0\0\0",
    )


def _event(code: int, body: bytes) -> bytes:
    size = 19 + len(body) + 4
    head = (0).to_bytes(4, "little") + bytes([code]) + (1).to_bytes(4, "little")
    head += size.to_bytes(4, "little") + (0).to_bytes(4, "little") + (0).to_bytes(2, "little")
    return head + body + b"\0\0\0\0"


def _two_tables(router: StreamRouter) -> tuple[bytes, bytes]:
    """Two tables of db `d` in different streams."""
    names = [f"t{i}".encode() for i in range(50)]
    first = names[0]
    other = next(n for n in names if router.stream_of(b"d", n) != router.stream_of(b"d", first))
    return first, other


def _fragment(markers: list | None = None, kind: FragmentKind = FragmentKind.DATA) -> Fragment:
    from cdc.keys import SortKey

    f = Fragment(SortKey(100, 0, 0), 1, 7, (1,), kind, [], markers or [])
    return f


def test_a_statement_over_two_streams_is_split_with_its_end_flag_in_each():
    router = StreamRouter(2)
    a, b = _two_tables(router)
    events = [
        _table_map(1, b"d", a),
        _table_map(2, b"d", b),
        _rows(1, 0),
        _rows(2, 0),
        _rows(1, RowsFlag.STMT_END),
    ]
    events[3] = _rows(2, 0)
    st = Statement((5, 0), events)
    txn = Transaction(GlobalKey(100, 0, 0, 0), 7, FragmentKind.DATA, [_fragment()], [st])
    parts = StreamSplitter(router).split([txn])
    sa, sb = router.stream_of(b"d", a), router.stream_of(b"d", b)
    (ta,), (tb,) = parts[sa], parts[sb]
    assert ta.key == tb.key == txn.key and ta.txn_id == tb.txn_id == 7
    (pa,), (pb,) = ta.statements, tb.statements
    assert pa.trace_id == pb.trace_id == (5, 0)
    assert [e[4] for e in pa.in_memory] == [
        EventType.TABLE_MAP,
        EventType.WRITE_ROWS_V1,
        EventType.WRITE_ROWS_V1,
    ]
    assert [e[4] for e in pb.in_memory] == [EventType.TABLE_MAP, EventType.WRITE_ROWS_V1]
    # each part's last rows event ends the statement (a replica releases its tables there)
    assert int.from_bytes(pa.in_memory[-1][25:27], "little") & RowsFlag.STMT_END
    assert int.from_bytes(pb.in_memory[-1][25:27], "little") & RowsFlag.STMT_END
    assert not int.from_bytes(pa.in_memory[1][25:27], "little") & RowsFlag.STMT_END


def test_ddl_goes_to_its_tables_stream_and_a_database_ddl_to_all():
    router = StreamRouter(3)
    key = GlobalKey(200, 0, 0, 0)
    table_ddl = Transaction(
        key,
        8,
        FragmentKind.DDL,
        [_fragment([{"db": "d", "tbl": "t1", "ddl": "ALTER"}], FragmentKind.DDL)],
    )
    db_ddl = Transaction(
        key,
        9,
        FragmentKind.DDL,
        [_fragment([{"db": "d", "tbl": "", "ddl": "DROP DATABASE d"}], FragmentKind.DDL)],
    )
    parts = StreamSplitter(router).split([table_ddl, db_ddl])
    home = router.stream_of(b"d", b"t1")
    for i, part in enumerate(parts):
        assert [t.txn_id for t in part] == ([8, 9] if i == home else [9])
    by_db = StreamRouter(3, "database")
    parts = StreamSplitter(by_db).split([db_ddl])
    assert sum(len(p) for p in parts) == 1 and parts[by_db.stream_of(b"d", b"x")]


def test_instruction_markers_go_to_no_stream():
    marker = Transaction(
        GlobalKey(300, 0, 0, 0),
        0,
        FragmentKind.INSTRUCTION,
        [_fragment([{"type": "FlushLogs"}], FragmentKind.INSTRUCTION)],
    )
    assert StreamSplitter(StreamRouter(2)).split([marker]) == [[], []]


def _by_statement(splitter: StreamSplitter, ready: list[Transaction]) -> list[list[Transaction]]:
    """The split without its whole-transaction shortcut: every data transaction routed
    statement by statement (`_split_rows`), as before the shortcut."""
    from dumper.pipeline.stream_split import _part

    out: list[list[Transaction]] = [[] for _ in range(splitter.streams)]
    for txn in ready:
        if txn.kind in (FragmentKind.DATA, FragmentKind.LOCAL):
            for stream, statements in splitter._split_rows(txn).items():
                out[stream].append(_part(txn, statements))
        else:
            for stream, part in enumerate(splitter.split([txn])):
                out[stream].extend(part)
    return out


@pytest.mark.parametrize("streams", [1, 2, 3, 5])
def test_the_whole_transaction_shortcut_splits_as_statement_by_statement(recorded, streams):
    router = StreamRouter(streams)
    a, b = _two_tables(StreamRouter(max(streams, 2)))
    key = GlobalKey(100, 0, 0, 0)

    def txn(*statements: list[bytes]) -> Transaction:
        sts = [Statement((i, 0), list(evs)) for i, evs in enumerate(statements)]
        return Transaction(key, 7, FragmentKind.DATA, [_fragment()], sts)

    made = [
        txn(),  # no statement: no stream
        txn([]),  # an empty statement
        txn([_rows(1, RowsFlag.STMT_END)]),  # orphan rows: no TABLE_MAP before them
        txn([_table_map(1, b"d", a), _rows(1, RowsFlag.STMT_END)]),
        txn([_table_map(1, b"d", a), _table_map(2, b"d", b), _rows(1, 0), _rows(2, 1)]),
        txn([_table_map(1, b"d", a), _rows(1, 1)], [_table_map(2, b"d", b), _rows(2, 1)]),
        txn([_table_map(1, b"d", a), _rows(1, 1)], [_table_map(3, b"d", a), _rows(3, 1)]),
        txn([_table_map(1, b"d", a), _rows(1, 1)], [_rows(9, 1)]),
    ]
    for ready in (recorded, made):
        splitter = StreamSplitter(router)
        got, want = splitter.split(ready), _by_statement(StreamSplitter(router), ready)
        assert len(got) == len(want) == streams
        for g, w in zip(got, want, strict=True):
            assert [t.key for t in g] == [t.key for t in w]
            for x, y in zip(g, w, strict=True):
                assert (x is y) or [s.in_memory for s in x.statements] == [
                    s.in_memory for s in y.statements
                ]
                assert [s.trace_id for s in x.statements] == [s.trace_id for s in y.statements]
