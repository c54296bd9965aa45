"""Issue 39 with several streams (docs/streams.md, "HA followers"): a stream's process is told
by its merge how long the merge's lease is sure (`Sure` frames); once that has passed its ack
gate never gives up waiting for followers and serves only what they acknowledged, and a stream
stopped then writes no STOP event; neither does one whose merge's term ended (`abandon`), while
a clean stop writes it. Real writers and stream processes; the lease is only frames here."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from binlog_writer import BinlogWriter, last_written_key
from cdc.binlog.constants import STOP_EVENT
from cdc.binlog.reader import read_file
from cdc.config import DumperPeer
from cdc.pauses import Pauses
from cdc.streams import stream_config, stream_dir
from dumper.ha.peers import FOLLOWER_SERVER_ID_BASE, follower_ack_gate
from dumper.ha.stream_term import CLOCK_DRIFT, LeaseDeadline
from dumper.pipeline.txn_encoder import TransactionEncoder
from dumper.streams.frames_pb2 import Batch, Sure
from dumper.streams.stream_process import StreamWriter, _pipes
from dumper.streams.stream_set import SURE_MAX_MS, StreamSet
from dumper.streams.wire import ToStream, framed
from tests.dumper.streams.test_stream_process import CLUSTER_UUID, batch, config
from tests.dumper.test_txn_encoder import transactions  # noqa: F401 (a fixture)


def last_file_types(directory) -> list[int]:
    """The type code of every event of the binlog's last file."""
    path = sorted(directory.glob("binlog.[0-9]*"))[-1]
    _, reader = read_file(path)
    return [raw.type_code for raw in reader]


def test_a_frame_that_waited_on_the_way_counts_from_when_it_was_sent():
    now = [100.0]
    lease = LeaseDeadline(clock=lambda: now[0])
    assert not lease.sure()  # no frame yet: in doubt
    # The merge's clock is another host's: 5000 s behind ours. A frame that came at once:
    lease.heard(sent_ms=95_000_000, sure_ms=1500)
    assert lease.until == pytest.approx(101.5) and lease.sure()
    now[0] = 101.6  # no frame since: the deadline passed by itself
    assert not lease.sure()
    # One sent 0.2 s later that waited 3 s on the way (behind batches, a paused stream): its
    # lease ended 1.3 s after it was sent, long before it came.
    now[0] = 104.2
    lease.heard(sent_ms=95_000_200, sure_ms=1500)
    assert not lease.sure()
    assert lease.until == pytest.approx(100.2 + 1.5 + 4.2 * CLOCK_DRIFT, abs=1e-9)
    now[0] = 104.3  # a fresh one: its transit is the smallest again
    lease.heard(sent_ms=95_004_300, sure_ms=1500)
    assert lease.until == pytest.approx(105.8) and lease.sure()


def test_the_merge_says_how_long_its_lease_is_sure(tmp_path):
    streams = StreamSet(config(tmp_path), CLUSTER_UUID, tmp_path / "state")
    assert streams.sure().sure.sure_ms == SURE_MAX_MS  # no HA node: sure for ever
    streams.sure_until = lambda: time.monotonic() + 2
    frame = streams.sure().sure
    assert 1900 <= frame.sure_ms <= 2000
    assert abs(frame.sent_ms - time.monotonic() * 1000) < 100
    streams.sure_until = lambda: 0.0  # stepped down
    assert streams.sure().sure.sure_ms == 0


def sure(sure_ms: int, waited_ms: int = 0) -> ToStream:
    sent = int(time.monotonic() * 1000) - waited_ms
    return ToStream(sure=Sure(sent_ms=sent, sure_ms=sure_ms))


async def test_a_stream_in_doubt_of_its_merges_lease_serves_acknowledged_data_only(
    tmp_path,
    transactions,  # noqa: F811
):
    cfg = config(tmp_path)
    cfg.dumper.id = 1
    cfg.dumper.peers = [
        DumperPeer(1, port=cfg.dumper.port),
        DumperPeer(2, port=cfg.dumper.port + 3),
    ]
    cfg = stream_config(cfg, 0)
    follower = FOLLOWER_SERVER_ID_BASE + 2
    sw = StreamWriter(cfg, 0, CLUSTER_UUID, Pauses())
    sw.lease = LeaseDeadline()  # as `_serve_stream` does for an HA term
    gate = follower_ack_gate(cfg.dumper, active=lambda: True, sure=sw.lease.sure)
    assert gate is not None and not gate.sure()  # no word from the merge yet
    frames_r, merge_w = os.pipe()
    answers_r, frames_out = os.pipe()
    reader, out = await _pipes(frames_r, frames_out)
    run = asyncio.create_task(sw.run(reader, out))
    encoder = TransactionEncoder(cfg.dumper.server_id, gtids=True)

    async def send(*frames: ToStream) -> None:
        await asyncio.to_thread(os.write, merge_w, b"".join(map(framed, frames)))

    async def until(check) -> None:
        async with asyncio.timeout(10):
            while not check():
                await asyncio.sleep(0.01)

    try:
        await send(sure(60_000), batch(encoder, transactions[:2], transactions[1].key))
        await until(lambda: sw.writer.gno == 2)
        acked = (sw.writer.file, sw.writer.position)
        gate.record(follower, *acked)  # the follower holds the first two
        await send(batch(encoder, transactions[2:4], transactions[3].key))
        await until(lambda: sw.writer.gno == 4)
        # Sure: a dump that waited past ack_wait_ms gets the rest anyway (degraded).
        assert gate.sure() and gate.limit(acked[0]) == acked[1]
        assert gate.give_up(acked[0], acked[1], 2.0) and gate.limit(acked[0]) is None
        # The merge's lease in doubt: a frame that says so, then one that comes 5 s late.
        for frame in (sure(0), sure(3000, waited_ms=5000)):
            await send(sure(60_000))
            await until(gate.sure)
            await send(frame)
            await until(lambda: not gate.sure())
            # not even degraded; and the follower's acknowledgement counts however old
            gate._clock = lambda: time.monotonic() + 3600
            assert gate.limit(acked[0]) == acked[1]
            assert not gate.give_up(acked[0], acked[1], 10.0)
            gate._clock = time.monotonic
        # The merge goes (its frames end) in doubt of its lease: no STOP event.
        os.close(merge_w)
        merge_w = -1
        await run
        sw.close()
        assert STOP_EVENT not in last_file_types(sw.writer.dir)
    finally:
        run.cancel()
        out.close()
        for fd in (merge_w, answers_r):
            if fd >= 0:
                os.close(fd)
    # A clean stop, its lease sure: STOP.
    sw = StreamWriter(cfg, 0, CLUSTER_UUID, Pauses())
    sw.lease = LeaseDeadline()
    sw.lease.heard(int(time.monotonic() * 1000), 60_000)
    assert last_written_key(sw.writer) == transactions[3].key
    sw.close()
    assert last_file_types(sw.writer.dir)[-1] == STOP_EVENT


async def test_a_fenced_merges_streams_end_without_a_stop_event(tmp_path, transactions):  # noqa: F811
    """Real stream processes: stopped cleanly each writes its STOP event; told to abandon (the
    merge's fence refused, `Leader.close`) none does, and each keeps all it received."""
    cfg = config(tmp_path)
    encoder = TransactionEncoder(cfg.dumper.server_id, gtids=True)
    dirs = [stream_dir(cfg.dumper, i) for i in range(2)]
    for txns, fenced in ((transactions[:2], False), (transactions[2:4], True)):
        streams = StreamSet(cfg, CLUSTER_UUID, tmp_path / "state")
        try:
            await streams.start()
            progress = txns[-1].key
            streams.send(0, batch(encoder, txns, progress))
            streams.send(1, ToStream(batch=Batch(progress=list(progress))))
            await streams.drain()
            if fenced:
                streams.abandon()
        finally:
            await streams.aclose()
        for d in dirs:
            assert (STOP_EVENT in last_file_types(d)) is not fenced, (d, fenced)
    with BinlogWriter(dirs[0]) as w:
        assert last_written_key(w) == transactions[3].key
