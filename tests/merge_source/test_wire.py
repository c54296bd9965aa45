"""The frames between a MergeSource process and MergeJoint (frames.proto), on every output of the
recorded real binlog (fragments of every kind, markers, watermarks with checkpoints), in memory and
spilled; and a MergeSource process on a real DN."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

from cdc.frames import FRAME, framed
from cdc.keys import Checkpoint, Kind, SortKey
from cdc.protocol import BinlogPosition, DumpSettings
from merge_source import wire
from merge_source.fork_server import ForkServer
from merge_source.fragment import Fragment, FragmentKind, Statement, Watermark
from merge_source.frames_pb2 import Batch, Frame
from merge_source.processor import SourceProcessor
from merge_source.source import SourceSpec
from merge_source.source_process import SourceFailed, SourceProcess, SourceProcessDied
from merge_source.spill import HANDOFF_PREFIX, sweep_handoffs
from merge_source.wire import (
    KIND_CODE,
    FatalError,
    Status,
    WireError,
    collapse_watermarks,
    decode_body,
    encode_batch,
    encode_error,
    encode_status,
    read_batch_frame,
)
from tests.merge_source.test_recorded import DN, feed_all


def round_trip(items, spill_dir=None):
    frame = encode_batch(items, spill_dir)
    (n,) = FRAME.unpack_from(frame)
    assert n == len(frame) - FRAME.size
    return decode_body(frame[FRAME.size :])


def in_frame_order(items):
    """A batch's items as a frame delivers them: its fragments, then its watermarks."""
    marks = [o for o in items if isinstance(o, Watermark)]
    return [o for o in items if not isinstance(o, Watermark)] + marks


def described(items):
    out = []
    for o in items:
        if isinstance(o, Watermark):
            out.append(("W", o.dn, o.key, o.checkpoint))
        else:
            out.append(
                (
                    "F",
                    o.key,
                    o.dn,
                    o.txn_id,
                    o.participants,
                    o.kind,
                    o.timestamp,
                    o.markers,
                    [(s.trace_id, list(s.iter_events())) for s in o.statements],
                )
            )
    return out


def test_every_recorded_output_round_trips():
    run = feed_all(SourceProcessor(DN, wait_for_start=True))
    items = [o for case in run.outputs for o in case]
    assert any(isinstance(o, Fragment) and o.markers for o in items)
    assert any(isinstance(o, Watermark) and o.checkpoint for o in items)
    assert described(round_trip(items)) == described(in_frame_order(items))


def _framed_batch(parts: list[Batch]) -> bytes:
    """A Frame body whose batch is `parts` serialized one after the other (protobuf merges
    them: a repeated field's runs are concatenated in the order they come)."""
    batch = b"".join(part.SerializeToString() for part in parts)
    n, length = len(batch), bytearray()
    while n >= 0x80:
        length.append(n & 0x7F | 0x80)
        n >>= 7
    return b"\x0a" + bytes(length) + bytes([n]) + batch


def test_the_direct_reader_and_protobuf_read_a_batch_alike():
    """`decode_body` reads a batch laid out as `encode_batch` writes it straight from its bytes
    (`read_batch_frame`); another valid encoding of the same message goes through protobuf: a
    column in two runs, the statements' events not consecutive, a field frames.proto does not
    know. The items are the same whichever way; fields in another order the reader takes."""
    run = feed_all(SourceProcessor(DN, wait_for_start=True))
    items = [o for case in run.outputs for o in case]
    items = [o for o in items if not (isinstance(o, Fragment) and o.markers)]  # markers: protobuf
    assert any(isinstance(o, Watermark) and o.checkpoint for o in items)
    body = encode_batch(items)[FRAME.size :]
    want = described(in_frame_order(items))
    assert read_batch_frame(body) is not None
    assert described(decode_body(body)) == want
    b = Frame.FromString(body).batch
    assert len(b.fragments) > 8 and len(b.statement_events) > 1
    cols = {
        "dn": Batch(dn=b.dn),
        "fragments": Batch(fragments=b.fragments),
        "participants": Batch(participants=b.participants),
        "statement_events": Batch(statement_events=b.statement_events),
        "statements": Batch(statements=b.statements),
        "watermarks": Batch(watermarks=b.watermarks),
        "checkpoints": Batch(checkpoints=b.checkpoints),
    }
    assert _framed_batch(list(cols.values())) == body  # the layout encode_batch writes
    reordered = _framed_batch(list(cols.values())[::-1])
    assert reordered != body and read_batch_frame(reordered) is not None
    assert described(decode_body(reordered)) == want
    split = dict(cols, fragments=Batch(fragments=b.fragments[:8]))
    split_head = _framed_batch([*split.values(), Batch(fragments=b.fragments[8:])])
    events = dict(cols, statement_events=Batch(statement_events=b.statement_events[:1]))
    apart = _framed_batch([*events.values(), Batch(statement_events=b.statement_events[1:])])
    unknown = _framed_batch([*cols.values(), Batch.FromString(b"\x78\x01")])  # field 15: 1
    for other in (split_head, apart, unknown):
        assert read_batch_frame(other) is None
        assert described(decode_body(other)) == want


def test_a_marker_column_or_a_dn_the_contract_does_not_know_is_refused():
    run = feed_all(SourceProcessor(DN, wait_for_start=True))
    items = [o for case in run.outputs for o in case]
    frag = next(o for o in items if isinstance(o, Fragment) and o.markers)
    frag.markers = [{**frag.markers[0], "new_column": 1}]
    with pytest.raises(WireError, match="new_column"):
        encode_batch([frag])
    with pytest.raises(WireError, match="DN"):
        encode_batch([Watermark(DN, frag.key), Watermark(DN + 1, frag.key)])


def test_a_frame_keeps_every_fragment_and_the_watermarks_merge_joint_uses():
    """MergeJoint keeps of a batch only the last watermark and the last checkpoint per DN."""
    run = feed_all(SourceProcessor(DN, wait_for_start=True))
    items = [o for case in run.outputs for o in case]
    marks = [o for o in items if isinstance(o, Watermark)]
    assert len(marks) > 2
    marks[-1] = Watermark(DN, marks[-1].key, None)  # the last one without a checkpoint
    items = [o for o in items if not isinstance(o, Watermark)] + marks
    out = collapse_watermarks(items)
    assert [o for o in out if isinstance(o, Fragment)] == [
        o for o in items if isinstance(o, Fragment)
    ]
    assert [o for o in out if isinstance(o, Watermark)] == [marks[-2], marks[-1]]
    assert marks[-2].checkpoint is not None
    assert collapse_watermarks(marks[:1]) == marks[:1]
    assert collapse_watermarks([]) == []


def test_spilled_statements_travel_as_handoff_files(tmp_path):
    spill, handoff = tmp_path / "spill", tmp_path / "handoff"
    spill.mkdir(), handoff.mkdir()
    run = feed_all(SourceProcessor(DN, wait_for_start=True, spill_bytes=1, spill_dir=str(spill)))
    items = [o for case in run.outputs for o in case]
    assert any(s.spilled for o in items if isinstance(o, Fragment) for s in o.statements)
    frame = encode_batch(items, str(handoff))
    assert any(p.name.startswith(HANDOFF_PREFIX) for p in handoff.iterdir())
    got = decode_body(frame[FRAME.size :])
    assert list(handoff.iterdir()) == []  # adopted: unlinked, alive through the open fd
    assert described(got) == described(in_frame_order(items))
    assert all(s.spilled for o in got if isinstance(o, Fragment) for s in o.statements)


def test_handoffs_of_dead_writers_are_swept(tmp_path):
    dead = tmp_path / f"{HANDOFF_PREFIX}999999999-x"
    mine = tmp_path / f"{HANDOFF_PREFIX}{os.getpid()}-y"
    dead.write_bytes(b"x"), mine.write_bytes(b"y")
    assert sweep_handoffs(str(tmp_path)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [mine.name]


def test_status_and_fatal_error_frames():
    sent = {"state": "up", "position": "binlog.000001:4", "silent_s": 0.5, "events": 3}
    frame = encode_status({**sent, "error": None}) + encode_error("dn1: broken")
    (n,) = FRAME.unpack_from(frame)
    status = decode_body(frame[FRAME.size : FRAME.size + n])
    error = decode_body(frame[2 * FRAME.size + n :])
    assert type(status) is Status
    assert status == {**sent, "error": None, "watermark_tso": None, "pending": 0, "bytes": 0}
    assert type(error) is FatalError and error == "dn1: broken"


@pytest.mark.parametrize("cut", [1, 5, 20, 40])
def test_truncated_or_garbage_frames_are_a_clear_error(cut):
    run = feed_all(SourceProcessor(DN, wait_for_start=True))
    body = encode_batch(run.outputs[3])[FRAME.size :]
    with pytest.raises(WireError, match="undecodable MergeSource frame"):
        decode_body(body[:-cut])
    with pytest.raises(WireError):
        decode_body(b"\x07" + body)  # wire type 7 does not exist
    with pytest.raises(WireError, match="empty frame"):
        decode_body(b"")


def spec_for(server, **kw) -> SourceSpec:
    settings = DumpSettings(
        "127.0.0.1", server.port, "root", "", server_id=9300 + server.server_id, name=server.name
    )
    return SourceSpec(settings, BinlogPosition("binlog.000001", 4), 1, server.name, **kw)


async def test_a_source_process_reads_a_real_dn_and_reports_status(cluster):
    dn = cluster.dn(1)
    forks = ForkServer()
    with dn.connect() as conn, conn.cursor() as cur:  # a local transaction: something to emit
        cur.execute("CREATE DATABASE IF NOT EXISTS wire_test")
        cur.execute("CREATE TABLE IF NOT EXISTS wire_test.t (id INT PRIMARY KEY)")
        cur.execute("REPLACE INTO wire_test.t VALUES (1)")
        conn.commit()
    queue: asyncio.Queue = asyncio.Queue(maxsize=4)
    source = SourceProcess(spec_for(dn), queue, forks)
    task = asyncio.create_task(source.run())
    try:
        batch = await asyncio.wait_for(queue.get(), 20)
        assert batch and all(isinstance(o, Fragment | Watermark) for o in batch)
        for _ in range(100):
            if source.status().get("state") == "up":
                break
            await asyncio.sleep(0.1)
        status = source.status()
        assert status["state"] == "up" and status["pid"] == source.pid
        assert status["position"].startswith("binlog.")
        # Killed: the leader is told it died (and restarts the pipeline, see the leader).
        os.kill(source.pid, signal.SIGKILL)
        while not queue.empty():
            queue.get_nowait()
        with pytest.raises(SourceProcessDied, match="killed by signal 9"):
            while True:  # keep draining: the worker may be blocked on a full pipe
                await asyncio.wait_for(asyncio.shield(task), 0.2) if task.done() else None
                try:
                    queue.get_nowait()
                except asyncio.QueueEmpty:
                    await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await forks.aclose()


async def test_a_fatal_source_error_crosses_the_pipe_with_its_message(cluster):
    dn = cluster.dn(1)
    spec = spec_for(dn)
    spec.start = BinlogPosition("binlog.999999", 4)
    forks = ForkServer()
    source = SourceProcess(spec, asyncio.Queue(), forks)
    try:
        with pytest.raises(SourceFailed, match="binlog.999999"):
            await asyncio.wait_for(source.run(), 30)
    finally:
        await forks.aclose()


async def _gone(pid: int) -> bool:
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_forked_workers_end_reaped_die_with_their_fork_server_which_restarts():
    forks = ForkServer()
    try:
        idle = await forks.spawn()  # waits for its spec: its stdin's end lets it go
        assert forks.pid is not None and idle.returncode is None
        idle.stdin.close()
        assert await asyncio.wait_for(idle.wait(), 20) == 0
        killed = await forks.spawn()
        killed.kill()
        assert await asyncio.wait_for(killed.wait(), 20) == -signal.SIGKILL
        with pytest.raises(ProcessLookupError):
            killed.kill()  # never signals a reaped pid
        orphan, server = await forks.spawn(), forks.pid
        os.kill(server, signal.SIGKILL)
        assert await asyncio.wait_for(orphan.wait(), 20) == -signal.SIGKILL
        assert await _gone(orphan.pid)  # PR_SET_PDEATHSIG
        again = await forks.spawn()  # a new server
        assert forks.pid not in (None, server) and again.returncode is None
    finally:
        await forks.aclose()
    assert await _gone(again.pid)


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


async def test_a_fork_server_forked_from_this_process_serves_then_a_new_python_replaces_it():
    if threading.active_count() != 1:
        pytest.skip("this test process has threads: fork_here starts a new Python instead")
    unused = ForkServer.fork_here()  # never used: closing it still reaps it
    unused_pid = unused._forked[0].pid  # type: ignore[index]
    await unused.aclose()
    assert await _gone(unused_pid)
    forks = ForkServer.fork_here()
    try:
        idle = await forks.spawn()
        server = forks.pid
        assert server is not None and _cmdline(server) == _cmdline(os.getpid())  # a fork of us
        idle.stdin.close()
        assert await asyncio.wait_for(idle.wait(), 20) == 0
        orphan = await forks.spawn()
        os.kill(server, signal.SIGKILL)
        assert await asyncio.wait_for(orphan.wait(), 20) == -signal.SIGKILL  # (noticed)
        again = await forks.spawn()  # the forked one is gone: a new Python
        assert forks.pid not in (None, server) and b"merge_source.fork_server" in _cmdline(
            forks.pid
        )
        assert await _gone(server)  # reaped
        again.stdin.close()
        assert await asyncio.wait_for(again.wait(), 20) == 0
    finally:
        await forks.aclose()


def _protobuf_frame(items, spill_dir=None) -> bytes:
    """A batch frame as encode_batch built it through protobuf before it wrote the bytes itself:
    the reference its bytes must equal."""
    frame = Frame()
    b = frame.batch
    head, parts, events, stmts, marks = [], [], [], [], []
    dn = -1
    for i, item in enumerate(o for o in items if isinstance(o, Fragment)):
        dn = item.dn
        head += (*item.key, item.txn_id, KIND_CODE[item.kind], item.timestamp)
        head += (len(item.participants), len(item.statements))
        parts += item.participants
        handoff = None
        for st in item.statements:
            stmts += (0, 0, 0) if st.trace_id is None else (1, *st.trace_id)
            if st.span is None:
                events.append(b"".join(st.in_memory) if st.packed is None else st.packed)
                continue
            if handoff is None:
                spans = [s.span for s in item.statements if s.span is not None]
                path, starts = wire.write_handoff(spans, spill_dir)
                handoff = iter(zip(starts, spans, strict=True))
            start, span = next(handoff)
            b.spilled.add(
                statement=len(events), path=path, start=start, size=span.size, count=span.count
            )
            events.append(b"")
        for m in item.markers:
            b.markers.add(fragment=i, **m)
    for item in items:
        if isinstance(item, Watermark):
            dn = item.dn
            if item.checkpoint is not None:
                cp = item.checkpoint
                b.checkpoints.add(
                    watermark=len(marks) // 3, file=cp[1], pos=cp[2], max_tso_seen=cp[3]
                )
            marks += item.key
    b.dn = max(dn, 0)
    if head:
        b.fragments.extend(head)
        b.participants.extend(parts)
        b.statement_events.extend(events)
        b.statements.extend(stmts)
    if marks:
        b.watermarks.extend(marks)
    return framed(frame)


class _Span:
    """A spilled statement's events as the encoder sees them: a size and a count."""

    def __init__(self, size, count):
        self.size, self.count = size, count


def _varied_batches():
    """Batches of every shape the encoder meets, values at the edges of their varints."""
    big = [0, 1, 127, 128, 300, 2**32 - 1, 2**32, 2**35 + 7, 2**63, 2**64 - 1]
    kinds = list(FragmentKind)
    marker = {"id": 2**40, "type": "CdcStart", "content": "{}"}
    ddl = {"id": 0, "db": "d", "tbl": "t", "ddl": "CREATE TABLE t (a int)", "schema_json": ""}
    for dn in (0, 1, 3, 2**32 - 1):
        yield []
        yield [Watermark(dn, SortKey(0, Kind.BRANCH, 0))]
        for n in range(1, 7):
            items = []
            for j in range(n):
                v = big[(j * 3 + n) % len(big)]
                kind = kinds[(j + n) % len(kinds)]
                statements = []
                for t in range((j + n) % 4):
                    trace = None if t % 2 else (big[(t + j) % len(big)], t)
                    if (t + j + n) % 5 == 4:
                        statements.append(Statement(trace, span=_Span(big[t + 3], t + 1)))
                    elif t == 2:
                        statements.append(Statement(trace, [b"ab" * 70, b"c"]))
                    else:
                        statements.append(Statement(trace, packed=b"x" * (t * 150 + j)))
                markers = {FragmentKind.INSTRUCTION: [marker], FragmentKind.DDL: [ddl, marker]}
                items.append(
                    Fragment(
                        SortKey(v, Kind(j % 2), big[-1 - j % len(big)]),
                        dn,
                        big[(j + 2) % len(big)],
                        tuple(big[k % 6] for k in range(j % 4)),
                        kind,
                        statements,
                        [dict(m) for m in markers.get(kind, [])],
                        big[j % 6],
                    )
                )
                if j % 2:
                    cp = None
                    if j % 3 == 1:
                        cp = Checkpoint(f"dn{dn}", f"binlog.{j:06d}", big[j], big[-j])
                    items.append(Watermark(dn, SortKey(big[j], Kind.LOCAL, j), cp))
            yield items


def test_the_written_batch_frame_is_protobufs_byte_for_byte(monkeypatch):
    """encode_batch writes the bytes protobuf serializes for the same Batch, whatever it holds:
    fragments of every kind, participants, statements packed, in pieces and spilled (their
    handoff files named the same both ways here), markers, watermarks with and without a
    checkpoint, values past 32 bits, empty columns."""
    handoffs = []

    def write_handoff(spans, spill_dir):
        handoffs.append(spans)
        return f"{spill_dir}/handoff-{len(spans)}", [2**33 * k for k in range(len(spans))]

    monkeypatch.setattr(wire, "write_handoff", write_handoff)
    n = 0
    for items in _varied_batches():
        n += 1
        assert encode_batch(items, "/spill") == _protobuf_frame(items, "/spill"), items
    assert n > 30 and handoffs
    for bad in (-1, 2**64):
        with pytest.raises(WireError, match="cannot hold"):
            encode_batch([Watermark(1, SortKey(bad, Kind.BRANCH, 0))])
    with pytest.raises(WireError, match="cannot hold"):
        encode_batch([Fragment(SortKey(1, Kind.BRANCH, 0), 1, 1, (2**32,), FragmentKind.DATA)])
