"""The stream processes (dumper/streams) without a cluster: the merge's `StreamSet` starts two,
feeds them encoded transactions over the contract, syncs them, loses one to SIGKILL and starts
it again; each stream's restart point is its own (its last transaction, or its progress when it
received none), its GTIDs are its own and gapless, and its port serves it."""

from __future__ import annotations

import asyncio
import os
import signal

import pymysql
import pytest

from binlog_writer import BinlogWriter, last_written_key
from cdc.config import Config, DumperUser
from cdc.keys import GlobalKey
from cdc.protocol.auth import native_hash
from cdc.streams import stream_dir, stream_port, stream_server_uuid
from cdc_equipment.local_cluster.testing import free_base_port
from dumper.pipeline.txn_encoder import TransactionEncoder
from dumper.streams.frames_pb2 import Batch
from dumper.streams.stream_set import StreamDied, StreamSet
from dumper.streams.wire import ToStream
from tests.dumper.test_txn_encoder import transactions  # noqa: F401 (a fixture)

CLUSTER_UUID = "6c6b0e1e-0000-4000-8000-00000000cdc1"


def config(tmp_path) -> Config:
    cfg = Config()
    cfg.dumper.port = free_base_port(2)
    cfg.dumper.binlog_dir = str(tmp_path / "binlog")
    cfg.dumper.streams = 2
    cfg.dumper.users = [DumperUser("u", native_hash("pw"), replication=True)]
    cfg.pipeline.fsync = "never"
    # each stream's server on its writer's loop: half the process starts (test time); the
    # chaos test runs the default, a server process per stream
    cfg.dumper.serve_process = False
    return cfg


def batch(encoder: TransactionEncoder, txns, progress: GlobalKey) -> ToStream:
    buf, ends, gtids, tsos, events = bytearray(), [], [], [], 0
    for txn in txns:
        events += encoder.encode_into(txn, buf, gtids)
        ends.append(len(buf))
        tsos.append(txn.tso)
    return ToStream(
        batch=Batch(
            events=bytes(buf),
            ends=ends,
            gtids=gtids,
            tsos=tsos,
            event_count=events,
            progress=list(progress),
        )
    )


async def test_each_stream_resumes_from_its_own_end_after_a_sigkill(tmp_path, transactions):  # noqa: F811
    cfg = config(tmp_path)
    streams = StreamSet(cfg, CLUSTER_UUID, tmp_path / "state")
    encoder = TransactionEncoder(cfg.dumper.server_id, gtids=True)
    first, rest = transactions[:3], transactions[3:5]
    try:
        assert await streams.start() == [None, None]
        progress = first[-1].key
        streams.send(0, batch(encoder, first, progress))
        streams.send(1, ToStream(batch=Batch(progress=list(progress))))  # idle: its progress only
        await streams.drain()
        # the checkpoint loop and a caller may sync at once: each gets its answer
        await asyncio.gather(streams.sync(), streams.sync(), streams.sync())
        victim = streams.processes[1].proc
        os.kill(victim.pid, signal.SIGKILL)
        await victim.wait()
        await asyncio.sleep(0.2)
        with pytest.raises(StreamDied):
            streams.check()
        ends = await streams.start()  # stream 1 again; stream 0 kept its process
        assert ends == [first[-1].key, progress]
        later = rest[-1].key
        streams.send(0, batch(encoder, rest, later))
        streams.send(1, ToStream(batch=Batch(progress=list(later))))
        await streams.drain()
        await streams.sync()
        # stream 0 serves its own binlog with its own server_uuid, gapless
        conn = await asyncio.to_thread(
            pymysql.connect,
            host="127.0.0.1",
            port=stream_port(cfg.dumper, 0),
            user="u",
            password="pw",
        )
        with conn, conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            (_file, _pos, _, _, gtid_set) = cur.fetchone()
        assert gtid_set == f"{stream_server_uuid(CLUSTER_UUID, 0)}:1-{len(first) + len(rest)}"
    finally:
        await streams.aclose()
    with BinlogWriter(stream_dir(cfg.dumper, 0)) as w:
        assert last_written_key(w) == rest[-1].key
    with BinlogWriter(stream_dir(cfg.dumper, 1)) as w:
        assert last_written_key(w) is None  # no transaction: its restart point is its progress
