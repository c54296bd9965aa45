"""A full binlog file system (a small tmpfs of its own) pauses a stream's process in place, as it
pauses the single stream's pipeline: the process lives on and says it waits, the merge shows the
pause (BINLOG_DISK_FULL) and waits for its answers past their timeout; once the file system is
grown the stream goes on from where its file ends, and holds every transaction it was sent
exactly once, in order, with gapless GTIDs."""

from __future__ import annotations

import asyncio
import os
import shutil
import struct
import subprocess
import time

import pytest

from binlog_writer import layout
from cdc.binlog.constants import GTID_EVENT, HEADER_LEN
from cdc.binlog.events import cts_mark_text, parse_cts
from cdc.binlog.gtid import sid_of
from cdc.binlog.reader import read_file
from cdc.keys import GlobalKey
from cdc.pauses import BINLOG_DISK_FULL, Pauses
from cdc.streams import stream_dir, stream_server_uuid
from dumper.pipeline.txn_encoder import TransactionEncoder
from dumper.streams import stream_set
from dumper.streams.frames_pb2 import Batch
from dumper.streams.stream_set import StreamSet
from dumper.streams.wire import ToStream
from merge_joint import Transaction
from tests.dumper.streams.test_stream_process import CLUSTER_UUID, batch, config
from tests.dumper.test_txn_encoder import transactions  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounts a tmpfs: needs root"
)

TXNS = 3000  # (recorded transactions again under new keys): several times the 256 KB tmpfs
PER_BATCH = 25
SYNC_EVERY = 10  # batches: what the checkpoint loop does, and it keeps the backlog small
TIMEOUT_S = 2.0  # an answer that does not come in this long ends a stream that is not paused


def renamed(base: list[Transaction], count: int) -> list[Transaction]:
    """`count` transactions, the recorded ones over and over under keys of their own."""
    t0 = max(t.key.tso for t in base) + 1
    out = []
    for i in range(count):
        t = base[i % len(base)]
        key = GlobalKey(t0 + i, t.key.kind, t.key.dn, t.key.seq)
        out.append(Transaction(key, t.txn_id, t.kind, t.fragments, t.statements))
    return out


def marks_and_gtids(directory) -> tuple[list[int], list[tuple[bytes, int]]]:
    """The TSO of every CTS mark and the (sid, gno) of every GTID event in the binlog files of
    `directory`, in file order (read only)."""
    tsos, gtids = [], []
    for name in layout.read_index(directory, "binlog"):
        _, reader = read_file(directory / name)
        for raw in reader:
            if raw.type_code == GTID_EVENT:
                sid, gno = struct.unpack_from("<16sQ", raw.data, HEADER_LEN + 1)
                gtids.append((sid, gno))
            elif (text := cts_mark_text(raw.data)) is not None:
                tsos.append(parse_cts(text))
    return tsos, gtids


async def until(predicate, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not {what} within {timeout}s"
        await asyncio.sleep(0.1)


async def test_a_full_disk_pauses_a_stream_until_there_is_room(
    tmp_path,
    transactions,  # noqa: F811
    monkeypatch,
):
    cfg = config(tmp_path)
    binlog = tmp_path / "binlog"
    binlog.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(binlog)], check=True)
    monkeypatch.setattr(stream_set, "SYNC_TIMEOUT_S", TIMEOUT_S)
    pauses = Pauses()
    streams = StreamSet(cfg, CLUSTER_UUID, tmp_path / "state", pauses)
    encoder = TransactionEncoder(cfg.dumper.server_id, gtids=True)
    txns = renamed(transactions, TXNS)

    async def feed() -> None:
        for n, i in enumerate(range(0, TXNS, PER_BATCH), 1):
            part = txns[i : i + PER_BATCH]
            streams.send(0, batch(encoder, part, part[-1].key))
            streams.send(1, ToStream(batch=Batch(progress=list(part[-1].key))))
            await streams.drain()
            if n % SYNC_EVERY == 0:
                await streams.sync()  # held here while a stream waits for room

    try:
        await streams.start()
        feeder = asyncio.create_task(feed())
        await until(lambda: streams.processes[0].paused is not None, "paused")
        assert pauses.active(BINLOG_DISK_FULL)
        assert "stream 0" in pauses.snapshot()[0]["detail"]
        await asyncio.sleep(2.5 * TIMEOUT_S)
        streams.check()  # both processes alive: the full disk paused stream 0, nothing ended
        assert not feeder.done()  # its sync is answered once the stream goes on
        subprocess.run(["mount", "-o", "remount,size=16m", str(binlog)], check=True)
        await asyncio.wait_for(feeder, 60)
        await streams.sync()
        assert streams.processes[0].paused is None and not pauses.active(BINLOG_DISK_FULL)
        assert [p.restarts for p in streams.processes] == [0, 0]
    finally:
        await streams.aclose()
        try:
            tsos, gtids = marks_and_gtids(stream_dir(cfg.dumper, 0))
            assert tsos == [t.key.tso for t in txns]  # each once, in order
            sid = sid_of(stream_server_uuid(CLUSTER_UUID, 0))  # the stream's own GTIDs, gapless
            assert gtids == [(sid, gno) for gno in range(1, TXNS + 1)]
        finally:
            subprocess.run(["umount", "-l", str(binlog)], check=False)
