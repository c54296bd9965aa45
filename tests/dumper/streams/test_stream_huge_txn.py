"""A huge (spilled) transaction with several streams: the splitter keeps a spilled statement in
its spill file when its tables are one stream's (it reads only its leading TABLE_MAPs), and the
merge (its own loop, with fake DN sources) sends it to its stream's process in parts encoded as
they go (`StreamSet.send_streamed`), which writes it part by part between whole transactions: every transaction once, in order,
gapless GTIDs, the huge one's events all there."""

from __future__ import annotations

from binlog_writer import layout
from cdc.binlog.constants import EventType
from cdc.binlog.gtid import sid_of
from cdc.binlog.reader import read_file
from cdc.keys import GlobalKey
from cdc.pauses import Pauses
from cdc.streams import StreamRouter, stream_dir, stream_server_uuid
from cdc_equipment.local_cluster.testing import free_base_port
from dumper.pipeline.stream_split import StreamSplitter
from dumper.pipeline.txn_encoder import TransactionEncoder
from dumper.streams import stream_leader
from dumper.streams.frames_pb2 import Batch
from dumper.streams.stream_set import StreamSet
from dumper.streams.wire import ToStream
from merge_joint import Transaction
from merge_source.classifier import table_name
from merge_source.fragment import Statement
from merge_source.spill import SpanWriter, SpillFile
from tests.dumper.pipeline import fakes
from tests.dumper.pipeline.test_leader import run_until
from tests.dumper.streams.test_stream_disk_full import marks_and_gtids
from tests.dumper.streams.test_stream_process import CLUSTER_UUID, batch, config
from tests.dumper.test_txn_encoder import transactions  # noqa: F401 (a fixture)

ROWS = {EventType.WRITE_ROWS_V1, EventType.UPDATE_ROWS_V1, EventType.DELETE_ROWS_V1}
ROWS |= {EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS}


class CountingSpill(SpillFile):
    """A spill file that counts the events read back from it."""

    __slots__ = ("read",)

    def iter_range(self, start, end):
        for e in super().iter_range(start, end):
            self.read += 1
            yield e


def spilled(txn: Transaction, directory, times: int) -> tuple[Transaction, CountingSpill]:
    """`txn` with the rows events of each statement `times` over, each statement in a spill
    file (as a MergeSource hands a huge transaction over), under a key after it."""
    spill = CountingSpill(str(directory))
    spill.read = 0
    statements = []
    for st in txn.statements:
        maps = [e for e in st.events if e[4] == EventType.TABLE_MAP]
        writer = SpanWriter(spill)
        writer.extend(maps + [e for e in st.events if e[4] in ROWS] * times)
        statements.append(Statement(st.trace_id, span=writer.span()))
    key = GlobalKey(txn.key.tso + 1_000_000, txn.key.kind, txn.key.dn, txn.key.seq)
    return Transaction(key, txn.txn_id, txn.kind, txn.fragments, statements), spill


def rows_events(txn: Transaction) -> int:
    return sum(1 for st in txn.statements for e in st.iter_events() if e[4] in ROWS)


def test_the_splitter_leaves_a_spilled_statement_of_one_stream_in_its_file(
    tmp_path,
    transactions,  # noqa: F811
):
    huge, spill = spilled(transactions[0], tmp_path, 50)
    databases = {
        table_name(e)[0].decode()
        for st in transactions[0].statements
        for e in st.events
        if e[4] == EventType.TABLE_MAP
    }
    router = StreamRouter(2, pinned=dict.fromkeys(databases, 1))  # its tables: stream 1's
    (part,) = StreamSplitter(router).split([huge])[1]
    assert part is huge and all(st.span is not None for st in part.statements)
    # of each statement only its leading TABLE_MAPs and the event after them were read
    read = spill.read
    assert read <= 3 * len(huge.statements) and rows_events(huge) == 50 * len(huge.statements)


async def test_a_huge_transaction_goes_to_its_stream_in_parts(tmp_path, transactions):  # noqa: F811
    cfg = config(tmp_path)
    streams = StreamSet(cfg, CLUSTER_UUID, tmp_path / "state")
    encoder = TransactionEncoder(cfg.dumper.server_id, gtids=True)
    before, after = transactions[:2], transactions[2:4]
    huge, _ = spilled(transactions[4], tmp_path, 200)
    after = [
        Transaction(
            GlobalKey(huge.key.tso + 1 + i, t.key.kind, t.key.dn, t.key.seq),
            t.txn_id,
            t.kind,
            t.fragments,
            t.statements,
        )
        for i, t in enumerate(after)
    ]
    try:
        await streams.start()
        streams.send(0, batch(encoder, before, before[-1].key))
        count, size = await streams.send_streamed(
            0, encoder.iter_encode(huge), huge.size, huge.tso, part_bytes=1024
        )
        assert size > 5 * 1024  # several parts
        streams.send(0, batch(encoder, after, after[-1].key))
        streams.send(1, ToStream(batch=Batch(progress=list(after[-1].key))))
        await streams.drain()
        await streams.sync()
    finally:
        await streams.aclose()
    tsos, gtids = marks_and_gtids(stream_dir(cfg.dumper, 0))
    assert tsos == [t.tso for t in (*before, huge, *after)]
    sid = sid_of(stream_server_uuid(CLUSTER_UUID, 0))
    assert gtids == [(sid, gno) for gno in range(1, len(tsos) + 1)]
    assert count == sum(1 for _ in encoder.iter_encode(huge))
    written = 0  # every rows event of the three batches and of the huge one's parts
    for name in layout.read_index(stream_dir(cfg.dumper, 0), "binlog"):
        _, reader = read_file(stream_dir(cfg.dumper, 0) / name)
        written += sum(1 for raw in reader if raw.type_code in ROWS)
    assert written == sum(rows_events(t) for t in (*before, huge, *after))


async def test_the_merge_sends_a_spilled_transaction_to_its_stream_in_parts(tmp_path):
    """The merge's own loop (`stream_leader`, fake DN sources): a spilled transaction between
    two in-memory ones, all on stream 1's tables, reaches stream 1 whole and in order."""
    cfg = fakes.config(tmp_path / "binlog")
    cfg.dumper.streams = 2
    cfg.dumper.port = free_base_port(2)
    cfg.dumper.serve_process = False  # (test time: each stream's server on its writer's loop)
    tables = {
        table_name(e) for st in fakes.STATEMENTS for e in st.events if e[4] == EventType.TABLE_MAP
    }
    cfg.dumper.stream_tables = {f"{db.decode()}.{t.decode()}": 1 for db, t in tables}
    spill = SpillFile(str(tmp_path))
    statements = []
    for st in fakes.STATEMENTS:
        writer = SpanWriter(spill)
        writer.extend(st.events)
        statements.append(Statement(st.trace_id, span=writer.span()))
    huge = fakes.branch(1, 200, (1,))
    huge.statements[:] = statements
    scripts = {
        1: fakes.Script(
            [
                [fakes.branch(1, 100, (1,)), huge, fakes.mark(1, 250)],
                [fakes.branch(1, 300, (1,)), fakes.mark(1, 400)],
            ]
        ),
        2: fakes.Script([[fakes.mark(2, 250)], [fakes.mark(2, 400)]]),
    }
    meta = fakes.FakeMetadata()
    leader = stream_leader(
        cfg,
        state_dir=tmp_path / "state",
        server_uuid=fakes.SERVER_UUID,
        pauses=Pauses(),
        factory=fakes.FakeFactory(scripts),
        metadata=meta,
    )
    # both DNs' checkpoints at 250 saved once 300 is written: every stream synced up to there
    await run_until(leader, lambda: len(meta.history) == 2 and leader.stats.last_tso == 300)
    assert leader.stats.spilled_bytes > 0  # it went in parts
    assert marks_and_gtids(stream_dir(cfg.dumper, 1))[0] == [100, 200, 300]
    assert marks_and_gtids(stream_dir(cfg.dumper, 0))[0] == []
