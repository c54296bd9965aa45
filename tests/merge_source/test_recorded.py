"""SourceProcessor on recorded MariaDB 10.11 binlog bytes (no server): every case of the commit
protocol, in binlog order, as recorded by `record_fixtures.py` (see its docstring for the cases).

Each case of `fixtures/expected.json` ends at a binlog position; the events up to it are fed and
the fragments, the last watermark and the checkpoint are compared with what the case expects.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import pytest

from cdc.binlog.fde import FormatDescription
from cdc.keys import Checkpoint, Kind, stream_name
from cdc.protocol import DnEvent
from cdc.protocol.dump_stream import scan_events
from merge_source.classifier import (
    FL_PREPARED_XA,
    Classifier,
    cn_txn_id,
    fast_commit_records,
    gtid_xid,
    table_name,
)
from merge_source.fragment import Fragment, FragmentKind, Watermark
from merge_source.group import GTID_FLAGS2_OFFSET, BinlogGroup, GroupAssembler
from merge_source.processor import SourceProcessor, file_number
from merge_source.renamer import NameMap
from merge_source.scan import packed_count, packed_events
from merge_source.sorter import binlog_seq
from merge_source.wire import collapse_watermarks, encode_batch
from tests.merge_source.record_fixtures import EXPECTED_FILE, load_events

EXPECTED = json.loads(EXPECTED_FILE.read_text())
CASES: list[dict] = EXPECTED["cases"]
DN = EXPECTED["dn_id"]
EVENTS = [DnEvent(f, p, d) for f, p, d in load_events()]
FDE, ROTATE, STOP, HEARTBEAT_EV, GTID_LIST, BINLOG_CHECKPOINT, GTID = 15, 4, 3, 27, 163, 161, 162
OUTSIDE_GROUPS = {FDE, ROTATE, STOP, HEARTBEAT_EV, GTID_LIST, BINLOG_CHECKPOINT}


def coordinate(file: str, pos: int) -> int:
    return binlog_seq(file_number(file), pos)


def ends() -> list[int]:
    return [coordinate(*c["end"]) for c in CASES]


@dataclass
class Run:
    """A processor fed case by case: per case its outputs and the checkpoint after it."""

    processor: SourceProcessor
    outputs: list[list[Fragment | Watermark]] = field(default_factory=list)
    checkpoints: list[Checkpoint | None] = field(default_factory=list)
    names: list[NameMap | None] = field(default_factory=list)

    def fragments(self) -> list[Fragment]:
        return [o for out in self.outputs for o in out if isinstance(o, Fragment)]


def feed_all(processor: SourceProcessor, events: list[DnEvent] = EVENTS) -> Run:
    run = Run(processor)
    i = 0
    for end in ends():
        out: list[Fragment | Watermark] = []
        while i < len(events) and coordinate(events[i].file, events[i].pos) < end:
            got = processor.feed(events[i])
            if got and isinstance(got[-1], Watermark):
                # A watermark carries the checkpoint of the moment it was taken.
                assert got[-1].checkpoint == processor.checkpoint()
            out += got
            i += 1
        run.outputs.append(out)
        run.checkpoints.append(processor.checkpoint())
        run.names.append(processor.names)
    assert i == len(events)
    return run


def describe(f: Fragment) -> dict:
    """A fragment in the vocabulary of expected.json."""
    d = {
        "txn": f.txn_id,
        "tso": f.tso,
        "kind": f.kind.value,
        "participants": list(f.participants),
        "statements": [
            {
                "trace": list(s.trace_id) if s.trace_id else None,
                "table": [x.decode() for x in table_name(s.events[0])],
                "types": [e[4] for e in s.events],
            }
            for s in f.statements
        ],
    }
    if f.kind is FragmentKind.INSTRUCTION:
        d["marker"] = f.markers[0]["type"]
    elif f.kind is FragmentKind.DDL:
        d["ddl"] = f.markers[0]["ddl"]
    return d


def prepare_position(txn_id: int) -> tuple[str, int]:
    """Where the XA prepare group of CN txn `txn_id` starts in the recording."""
    for e in EVENTS:
        if e.type_code == GTID and e.data[GTID_FLAGS2_OFFSET] & FL_PREPARED_XA:
            fmt, gtrid, _ = gtid_xid(e.data)
            if cn_txn_id(fmt, gtrid) == txn_id:
                return e.file, e.pos
    raise AssertionError(f"no prepare of txn {txn_id} in the recording")


def last_group_end(end: int) -> tuple[str, int]:
    """The end of the last group before `end`: its terminator is the last event in a group."""
    inside = [
        e for e in EVENTS if coordinate(e.file, e.pos) < end and e.type_code not in OUTSIDE_GROUPS
    ]
    return inside[-1].file, inside[-1].end


@pytest.fixture(scope="module")
def run() -> Run:
    return feed_all(SourceProcessor(DN, wait_for_start=True))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_case(run: Run, index: int):
    case = CASES[index]
    out = run.outputs[index]
    frags = [o for o in out if isinstance(o, Fragment)]
    assert [describe(f) for f in frags] == case["emits"], case["doc"]

    start = ends()[index - 1] if index else 0
    for f in frags:
        if f.kind is FragmentKind.LOCAL:
            # Right after the largest TSO seen, at its own binlog position inside the case.
            assert f.key.kind is Kind.LOCAL and start <= f.key.seq < ends()[index]
        else:
            assert f.key.kind is Kind.BRANCH
        assert f.timestamp > 0  # the DN commit time, from the GTID event

    marks = [o for o in out if isinstance(o, Watermark)]
    if case["watermark"] is None:
        assert marks == []
    else:
        tso, kind = case["watermark"]
        assert (marks[-1].key.tso, marks[-1].key.kind.name.lower()) == (tso, kind)
        assert all(m.dn == DN for m in marks)

    cp = run.checkpoints[index]
    expected = case["checkpoint"]
    if expected["pending"] is not None:
        file, pos = prepare_position(expected["pending"])
    else:
        file, pos = last_group_end(ends()[index])
    assert cp == Checkpoint(stream_name(DN), file, pos, expected["max_tso"])


def test_releases_increase_and_are_exactly_the_committed_set(run: Run):
    items = [o for out in run.outputs for o in out]
    keys = [o.key for o in items if isinstance(o, Fragment)]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    marks = [o.key for o in items if isinstance(o, Watermark)]
    assert marks == sorted(marks)
    # Rolled back (7, 9), heartbeats (12, 17) and the one-phase xid (15) never appear as CN txns.
    txns = [f.txn_id for f in run.fragments() if f.txn_id]
    assert txns == [1, 2, 3, 4, 6, 5, 8, 10, 11, 13, 14, 16]
    assert run.processor.sorter.pending == 0 and run.processor.sorter.orphans == 0
    assert run.processor.assembler.dropped_partial == 0


def test_rows_of_a_rolled_back_branch_are_in_the_binlog_but_never_emitted(run: Run):
    doomed = [e for e in EVENTS if e.type_code == 23 and b"doomed" in e.data]
    assert len(doomed) == 1  # MariaDB logs the rows at prepare
    assert not any(b"doomed" in e for f in run.fragments() for e in f.iter_events())


def test_the_recording_holds_what_the_cases_claim():
    commits = [e for e in EVENTS if e.type_code == 2 and b"XA COMMIT X'6364632d3136'" in e.data]
    assert [e.file for e in commits] == ["binlog.000002"]  # commit after restart: new file
    assert prepare_position(16)[0] == "binlog.000001"
    one_phase = CASES[[c["name"] for c in CASES].index("one_phase")]
    before = ends()[CASES.index(one_phase) - 1]
    span = [
        e for e in EVENTS if before <= coordinate(e.file, e.pos) < coordinate(*one_phase["end"])
    ]
    assert 38 not in {e.type_code for e in span}  # no XA_PREPARE: a plain transaction
    assert 16 in {e.type_code for e in span}  # ... ending with XID
    # The overwritten tombstone is an UPDATE of __cdc_tx_log__.
    updates = [e for e in EVENTS if e.type_code == 24]
    assert len(updates) == 3  # the user UPDATE, the overwritten record, the second heartbeat


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_restart_from_the_checkpoint_after_each_case(run: Run, index: int):
    """Re-read from the checkpoint of case `index`, drop what was emitted: the same tail comes."""
    cp = run.checkpoints[index]
    emitted = [f for out in run.outputs[: index + 1] for f in out if isinstance(f, Fragment)]
    resume = emitted[-1].global_key if emitted else None
    # What the leader does: names as of the resume point, wait for CdcStart only on a first start.
    processor = SourceProcessor(
        DN,
        resume_after=resume,
        max_tso_seen=cp.max_tso_seen,
        names=run.names[index],
        wait_for_start=resume is None,
    )
    start = coordinate(cp.file, cp.position)
    fde = next(e for e in EVENTS if e.file == cp.file and e.type_code == FDE)
    # A dump started mid-file re-sends the file's FDE first.
    events = [fde] + [e for e in EVENTS if coordinate(e.file, e.pos) >= start and e is not fde]
    out = [o for e in events for o in processor.feed(e)]
    tail = [f for f in out if isinstance(f, Fragment)]
    expected = [f for out in run.outputs[index + 1 :] for f in out if isinstance(f, Fragment)]
    assert [(f.key, describe(f)) for f in tail] == [(f.key, describe(f)) for f in expected]
    marks = [o.key for o in out if isinstance(o, Watermark)]
    final = [o.key for o in run.outputs[-1] if isinstance(o, Watermark)][-1]
    assert marks[-1:] == ([] if index == len(CASES) - 1 else [final])


def test_without_wait_for_start_the_local_before_cdc_start_keeps_physical_names(run: Run):
    fresh = feed_all(SourceProcessor(DN))
    first, *rest = fresh.fragments()
    assert (first.kind, first.tso, first.key.kind) == (FragmentKind.LOCAL, 0, Kind.LOCAL)
    assert table_name(first.statements[0].events[0]) == (b"rec_p", b"t_p0000")
    assert [(f.key, describe(f)) for f in rest] == [(f.key, describe(f)) for f in run.fragments()]


def test_each_physical_table_left_out_is_logged_once(caplog):
    """Rows dropped for want of a logical name leave a trail: one line per physical table."""
    with caplog.at_level(logging.INFO, logger="merge_source.processor"):
        feed_all(SourceProcessor(DN, wait_for_start=True))
    left_out = sorted(r.getMessage().split()[3] for r in caplog.records if "left out" in r.message)
    # The copy of a partition moving here and the broadcast replica that does not speak.
    assert left_out == ["rec_p.b", "rec_p.t_p0001"]


def test_spilling_every_group_gives_identical_fragments(run: Run, tmp_path):
    spilled = feed_all(
        SourceProcessor(DN, wait_for_start=True, spill_bytes=1, spill_dir=str(tmp_path))
    )
    a, b = run.fragments(), spilled.fragments()
    assert [(f.key, describe(f)) for f in b] == [(f.key, describe(f)) for f in a]
    assert [list(f.iter_events()) for f in b] == [list(f.iter_events()) for f in a]
    assert all(s.spilled for f in b for s in f.statements)
    assert not any(s.spilled for f in a for s in f.statements)
    assert spilled.processor.assembler.spilled_groups > 50
    assert list(tmp_path.iterdir()) == []  # spill files are anonymous
    assert spilled.checkpoints == run.checkpoints


@pytest.mark.parametrize("size", [2, 7, 50, len(EVENTS)])
def test_feeding_in_batches_gives_the_same_outputs_and_checkpoints(run: Run, size: int):
    """`feed_batch` (what MergeSource uses) is `feed` per event: in particular a watermark's
    checkpoint never runs ahead into a group of the same batch not yet processed."""
    processor = SourceProcessor(DN, wait_for_start=True)
    out = []
    for i in range(0, len(EVENTS), size):
        out += processor.feed_batch(EVENTS[i : i + size])
    expected = [o for case in run.outputs for o in case]
    assert [(type(o), o.key) for o in out] == [(type(o), o.key) for o in expected]
    marks = [o.checkpoint for o in out if isinstance(o, Watermark)]
    assert marks == [o.checkpoint for o in expected if isinstance(o, Watermark)]
    assert processor.checkpoint() == run.checkpoints[-1]


def test_commit_record_fast_path_agrees_with_the_generic_row_decoder():
    fast, generic = Classifier(), Classifier()
    generic.fast_records = False
    records = 0
    for item in GroupAssembler().assemble(EVENTS):
        if not isinstance(item, BinlogGroup):
            fast.fde = generic.fde = FormatDescription.parse(memoryview(item.data)[19:])
            continue
        a, b = fast.classify(item), generic.classify(item)
        assert (a.kind, a.records, a.markers) == (b.kind, b.records, b.markers)
        records += len(a.records)
    assert records == 16  # 14 commit records (one an UPDATE over a tombstone), 2 tombstones
    # ... and the fast path did read every one of them (none fell back).
    table_maps: dict[bytes, bytes] = {}
    for e in EVENTS:
        if e.type_code == 19:
            table_maps[e.data[19:25]] = e.data
        elif (
            e.type_code in (23, 24)
            and table_name(table_maps[e.data[19:25]])[1] == b"__cdc_tx_log__"
        ):
            assert fast_commit_records(e.data, 4), e


def dump_packets(events: list[bytes]) -> bytes:
    """`events` as a DN sends them in a binlog dump: a packet each (length, id, OK byte)."""
    return b"".join((len(e) + 1).to_bytes(3, "little") + b"\0\0" + e for e in events)


def packed_batches(events: list[DnEvent], size: int) -> list[tuple[str, list]]:
    """`events` as a MergeSource process reads them (`DumpClient.raw_batches(packed=True)`):
    batches of `size` events of one file, the plain events left in their dump packets
    (`(data, start, stop)` runs) and any other event (ROTATE, STOP...) as its bytes."""
    out = []
    for i in range(0, len(events), size):
        by_file: dict[str, list[bytes]] = {}
        for e in events[i : i + size]:
            by_file.setdefault(e.file, []).append(e.data)
        for file, datas in by_file.items():
            packets = dump_packets(datas)
            pieces: list = []
            pos = k = 0
            while pos < len(packets):
                stop, _last = scan_events(packets, pos, True)
                if stop > pos:
                    pieces.append((packets, pos, stop))
                    k += packed_count(packets, pos, stop, -1)
                    pos = stop
                if pos < len(packets):  # not a plain event of the file: as bytes
                    pieces.append(datas[k])
                    pos += 5 + len(datas[k])
                    k += 1
            out.append((file, pieces))
    return out


@pytest.mark.parametrize("size", [2, 7, 50, len(EVENTS)])
def test_packed_batches_give_the_same_frames_and_checkpoints(size: int):
    """A MergeSource process's read (`feed_packed`: groups as ranges of the dump batch, their
    statements one buffer each) sends the leader the same bytes as `feed_raw`, renamed
    statements and dropped tables included, and keeps the same checkpoints."""
    raw, packed = (SourceProcessor(DN, wait_for_start=True) for _ in range(2))
    fragments = 0
    for file, pieces in packed_batches(EVENTS, size):
        datas = [p for piece in pieces for p in _events_of(piece)]
        a, b = raw.feed_raw(file, datas), packed.feed_packed(file, pieces)
        assert encode_batch(collapse_watermarks(b)) == encode_batch(collapse_watermarks(a))
        assert packed.checkpoint() == raw.checkpoint()
        fragments += sum(type(o) is Fragment for o in b)
    assert fragments == len(feed_all(SourceProcessor(DN, wait_for_start=True)).fragments()) > 10
    assert packed.names == raw.names is not None


def test_packed_groups_larger_than_the_spill_threshold_spill(run: Run, tmp_path):
    processor = SourceProcessor(DN, wait_for_start=True, spill_bytes=1, spill_dir=str(tmp_path))
    out = []
    for file, pieces in packed_batches(EVENTS, 50):
        out += processor.feed_packed(file, pieces)
    fragments = [o for o in out if isinstance(o, Fragment)]
    assert [list(f.iter_events()) for f in fragments] == [
        list(f.iter_events()) for f in run.fragments()
    ]
    assert all(s.spilled for f in fragments for s in f.statements)


def _events_of(piece) -> list[bytes]:
    if type(piece) is tuple:
        data, start, stop = piece
        return packed_events(data, start, stop)
    return [piece]
