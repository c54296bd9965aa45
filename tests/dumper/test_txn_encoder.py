"""The transaction encoder's byte patching against the codec's reference path, on recorded real
MariaDB fragments: after the writer stamps log_pos and CRC, both give the same bytes."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from binlog_writer.fsync import FsyncPolicy
from binlog_writer.writer import BinlogWriter
from cdc.binlog.constants import ROWS_V1_TYPES, ROWS_V2_TYPES, EventType
from cdc.binlog.events import XidEvent, cts_mark, encode_event
from cdc.binlog.fastpath import rewrite
from cdc.binlog.query import QueryEvent
from cdc.binlog.reader import EventReader
from cdc.keys import GlobalKey, Kind, SortKey
from dumper.pipeline.encoded_batch import EncodedBatch
from dumper.pipeline.table_id_map import TableIdMap
from dumper.pipeline.txn_encoder import EncodeError, TransactionEncoder, first_spilled
from merge_joint.merger import Transaction, coalesce
from merge_source.classifier import table_name
from merge_source.fragment import Fragment, FragmentKind, Statement
from merge_source.processor import SourceProcessor
from tests.merge_source.test_recorded import DN, feed_all

SID = 77


def reference(txn: Transaction, ids: TableIdMap, xid: int) -> list[bytes]:
    """What the encoder wrote before it patched in place: one `rewrite` (a copy and a CRC)
    per event and the codec's `encode_event` for BEGIN, XID and the mark."""
    ts = max(f.timestamp for f in txn.fragments)
    out = [encode_event(QueryEvent(b"BEGIN"), timestamp=ts, server_id=SID)]
    for st in txn.statements:
        local: dict[bytes, int] = {}
        for e in st.events:
            if e[4] == EventType.TABLE_MAP:
                local[e[19:25]] = tid = ids.id_for(*table_name(e))
            elif e[4] in ROWS_V1_TYPES | ROWS_V2_TYPES:
                tid = local[e[19:25]]
            else:
                continue
            out.append(bytes(rewrite(e, table_id=tid, server_id=SID, timestamp=ts)))
    out.append(encode_event(XidEvent(xid), timestamp=ts, server_id=SID))
    tso, kind, dn, seq = txn.key
    suffix = b"" if kind == Kind.BRANCH else f"L{dn}.{seq}".encode()
    out.append(encode_event(cts_mark(tso, suffix), timestamp=ts, server_id=SID))
    return out


@pytest.fixture(scope="module")
def transactions() -> list[Transaction]:
    fragments = feed_all(SourceProcessor(DN, wait_for_start=True)).fragments()
    # one DN's fragments: each a transaction of its own (coalesce would miss the other DNs)
    txns = [Transaction(f.global_key, f.txn_id, f.kind, [f], f.statements) for f in fragments]
    data = [t for t in txns if t.kind in (FragmentKind.DATA, FragmentKind.LOCAL)]
    assert len(data) >= 5 and any(t.key[1] == Kind.LOCAL for t in data)
    return data


def stamped(tmp_path, name: str, txns: list[list[bytes]]) -> bytes:
    writer = BinlogWriter(
        tmp_path / name, fsync=FsyncPolicy.never(), clock=lambda: 1000, server_id=SID
    )
    for events in txns:
        writer.append_transaction(events)
    writer.close()
    return (tmp_path / name / writer.files()[0]).read_bytes()


def test_patched_events_equal_the_reference_rewrite(transactions, tmp_path):
    encoder, ids = TransactionEncoder(SID), TableIdMap()
    ours, ref = [], []
    for i, txn in enumerate(transactions, 1):
        ours.append(encoder.encode(txn))
        ref.append(reference(txn, ids, i))
    assert stamped(tmp_path, "ours", ours) == stamped(tmp_path, "ref", ref)
    # and the result reads back: v2 rows, renumbered table ids, our server id
    events = list(EventReader(stamped(tmp_path, "again", ours), file="ours"))
    assert {e.type_code for e in events} & ROWS_V1_TYPES == set()
    assert {e.header.server_id for e in events} == {SID}
    assert all(e.header.log_pos == e.end for e in events[1:])


def test_one_buffer_per_transaction_equals_the_event_list(transactions, tmp_path):
    """`encode_into` + `append_encoded` (the leader's path) write the same file as `encode`."""
    lists, buffers = TransactionEncoder(SID), TransactionEncoder(SID)
    writer = BinlogWriter(
        tmp_path / "buf", fsync=FsyncPolicy.never(), clock=lambda: 1000, server_id=SID
    )
    ours = []
    for txn in transactions:
        events = lists.encode(txn)
        ours.append(events)
        buf = bytearray(b"left alone")
        assert buffers.encode_into(txn, buf) == len(events)
        assert buf == b"left alone" + b"".join(events)
        writer.append_encoded(buf[len(b"left alone") :])
    writer.close()
    assert (tmp_path / "buf" / writer.files()[0]).read_bytes() == stamped(tmp_path, "list", ours)


def packed(txn: Transaction) -> Transaction:
    """`txn` with each statement as the leader gets it from a MergeSource process: its events
    in one bytes value (`Statement.packed`)."""
    statements = [Statement(st.trace_id, None, None, b"".join(st.events)) for st in txn.statements]
    return Transaction(txn.key, txn.txn_id, txn.kind, txn.fragments, statements)


def test_packed_statements_encode_as_the_event_lists(transactions):
    """The encoder walks a packed statement in place (the leader's path): the same bytes as
    from the statement's events one by one, v1 rows turned into v2 included."""
    lists, spans = TransactionEncoder(SID), TransactionEncoder(SID)
    assert any(
        e[4] in ROWS_V1_TYPES for t in transactions for st in t.statements for e in st.events
    )
    for txn in transactions:
        one, other = bytearray(), bytearray()
        assert lists.encode_into(txn, one) == spans.encode_into(packed(txn), other)
        assert one == other
        assert packed(txn).statements[0].events == txn.statements[0].events


def test_packed_rows_without_their_table_map_are_the_same_error(transactions):
    txn = transactions[0]
    rows = [e for st in txn.statements for e in st.events if e[4] in ROWS_V1_TYPES | ROWS_V2_TYPES]
    frag = Fragment(SortKey(txn.tso, Kind.BRANCH, 1), DN, 42, (), FragmentKind.DATA)
    frag.statements = [Statement(None, None, None, rows[0])]
    out = bytearray()
    with pytest.raises(EncodeError, match=f"txn 42 at TSO {txn.tso}"):
        TransactionEncoder(SID).encode_into(coalesce(frag.global_key, [frag]), out)


def test_ddl_gives_the_table_a_new_id_in_its_next_table_map(transactions):
    encoder = TransactionEncoder(SID)
    txn = transactions[0]
    tm = next(e for st in txn.statements for e in st.events if e[4] == EventType.TABLE_MAP)
    first = next(e for e in encoder.encode(txn) if e[4] == EventType.TABLE_MAP)
    again = next(e for e in encoder.encode(txn) if e[4] == EventType.TABLE_MAP)
    assert first[19:25] == again[19:25]  # cached by content: the same id
    encoder.table_ids.bump(*table_name(tm))
    encoder.patcher.forget()  # what _ddl does after the bump
    bumped = next(e for e in encoder.encode(txn) if e[4] == EventType.TABLE_MAP)
    assert int.from_bytes(bumped[19:25], "little") > int.from_bytes(first[19:25], "little")


def test_rows_without_their_table_map_are_an_error_naming_the_txn(transactions):
    txn = transactions[0]
    rows = [e for st in txn.statements for e in st.events if e[4] in ROWS_V1_TYPES | ROWS_V2_TYPES]
    frag = Fragment(SortKey(txn.tso, Kind.BRANCH, 1), DN, 42, (), FragmentKind.DATA)
    frag.statements = [Statement(None, rows[:1])]
    with pytest.raises(EncodeError, match=f"txn 42 at TSO {txn.tso}"):
        TransactionEncoder(SID).encode(coalesce(frag.global_key, [frag]))


def test_mariadb_flavour_a_gtid_event_replaces_begin(transactions, tmp_path):
    """The mariadb flavour: MariaDB GTID (162, flags2 transactional) instead of MySQL's GTID
    and BEGIN, the rest as in the mysql flavour; the writer numbers it; both paths agree;
    a DDL's GTID is standalone; mariadb-binlog reads the file."""
    from binlog_writer import MariadbGtids
    from cdc.binlog.events import BinlogCheckpointEvent, MariadbGtidEvent, cts_mark_text
    from cdc.binlog.mariadb_gtid import FLAGS2_DDL, FLAGS2_TRANSACTION
    from tests.binlog_writer.test_recovery import readable

    mysql = TransactionEncoder(SID, gtids=True)
    lists = TransactionEncoder(SID, gtids=True, flavor="mariadb")
    buffers = TransactionEncoder(SID, gtids=True, flavor="mariadb")
    writer = BinlogWriter(
        tmp_path,
        server_id=SID,
        server_version="10.11.19-MariaDB-cdc-log",
        gtids=MariadbGtids(5, SID),
    )
    for txn in transactions:
        events = lists.encode(txn)
        theirs = mysql.encode(txn)
        # The CTS mark: the same text in a BINLOG_CHECKPOINT (161) instead of a ROWS_QUERY.
        assert [e[4] for e in events] == [162] + [e[4] for e in theirs[2:-1]] + [161]
        assert events[1:-1] == theirs[2:-1]
        assert cts_mark_text(events[-1]) == cts_mark_text(theirs[-1]) is not None
        assert BinlogCheckpointEvent.parse(events[-1][19:-4], None).log_file.startswith(b"CTS::")
        assert events[-1][17:19] == b"\0\0"  # no flags, as MariaDB writes it
        buf, at = bytearray(), []
        assert buffers.encode_into(txn, buf, at) == len(events) and at == [0]
        assert buf == b"".join(events)
        writer.append_batch(buf, [len(buf)], at)
    ddl = lists._ddl_gtid_tail
    assert MariadbGtidEvent.parse(ddl[15:-4], None).flags2 == FLAGS2_DDL
    # A DDL (two standalone groups for a CREATE TABLE) ends with the same mark carrier.
    marker = {"db": "d", "tbl": "t", "ddl": "CREATE TABLE t (id INT PRIMARY KEY)"}
    fake = SimpleNamespace(fragments=[SimpleNamespace(markers=[marker])], tso=77)
    events = lists._ddl(fake, 1)
    assert [e[4] for e in events] == [162, 2, 162, 2, 161]
    assert cts_mark_text(events[-1]) == b"CTS::77"
    writer.append_encoded(bytearray(b"".join(events)))
    writer.close()
    path = tmp_path / writer.files()[0]
    gtids = [
        MariadbGtidEvent.parse(e.data[19:-4], None)
        for e in EventReader(path.read_bytes(), file="m")
        if e.type_code == 162
    ]
    n = len(transactions)
    assert [(g.domain_id, g.seq_no, g.flags2) for g in gtids] == [
        (5, i, FLAGS2_TRANSACTION) for i in range(1, n + 1)
    ] + [(5, n + 1, FLAGS2_DDL), (5, n + 2, FLAGS2_DDL)]
    assert readable(path)
    out = subprocess.run(
        ["mariadb-binlog", "--no-defaults", "--verify-binlog-checksum", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Binlog checkpoint CTS::77\n" in out


def test_a_run_of_transactions_encodes_as_one_add_each(transactions):
    """The leader's write loop (`EncodedBatch.add_run`: `encode_run`, compiled) gives the batch
    that `add` per transaction gives: the same bytes, ends, TSOs, GTID offsets and event count,
    an INSTRUCTION skipped; `first_spilled` ends a run at a spilled transaction."""
    marker = Transaction(GlobalKey(1, 1, DN, 1), 0, FragmentKind.INSTRUCTION, [], [])
    txns = [*transactions[:3], marker, *transactions[3:]]
    for flavor in ("mysql", "mariadb"):
        one, run = EncodedBatch(), EncodedBatch()
        a = TransactionEncoder(SID, gtids=True, flavor=flavor)
        b = TransactionEncoder(SID, gtids=True, flavor=flavor)
        for txn in txns:
            if txn.kind is not FragmentKind.INSTRUCTION:
                one.add(a, txn)
        assert first_spilled(txns, 0) == len(txns)
        run.add_run(b, txns, 0, len(txns))
        assert (run.buf, run.ends, run.tsos, run.gtids, run.events) == (
            one.buf,
            one.ends,
            one.tsos,
            one.gtids,
            one.events,
        )
        assert len(one.ends) == len(transactions) and one.gtids
    spilled = Statement(None, span=object())
    txns[5] = Transaction(txns[5].key, 0, FragmentKind.DATA, [], [spilled])
    assert first_spilled(txns, 0) == 5 and first_spilled(txns, 6) == len(txns)
