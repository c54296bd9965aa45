"""Many consumers at once (issue 23, item 5): 64 dump clients of the server process while a real
BinlogWriter writes and rotates; some clients stop reading. The writer and the other clients go
on, and what waits for a stalled client is bounded (one send batch plus a socket's worth), so the
server process's memory does not grow with what the stalled clients missed. Real server process,
real sockets, real writer; assertions on bytes and positions, never on speed."""

from __future__ import annotations

import asyncio
import struct

import pytest

from binlog_writer import BinlogWriter, FsyncPolicy
from cdc.binlog.events import XidEvent, cts_mark
from cdc.binlog.query import QueryEvent
from cdc.config import Config
from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import Command
from dumper.server.dump.shared_reads import DEFAULT_MAX_BYTES
from dumper.server.serve_process import ServeProcess
from tests.dumper.helpers import PASSWORD, USER, make_config

pytestmark = pytest.mark.asyncio(loop_scope="function")

CLIENTS = 64
STALLED = 16
TXN_PAD = 8 * 1024  # bytes of SQL text per transaction: few, large events keep the test cheap
WRITTEN_MB = 16
ROTATE, HEARTBEAT = 4, 27
ARTIFICIAL = 0x20


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


async def start_dump(port: int, server_id: int) -> MysqlClient:
    c = await MysqlClient.connect("127.0.0.1", port, USER, PASSWORD)
    await c.query("SET @master_binlog_checksum = 'CRC32'")
    body = struct.pack("<IHI", 4, 0, server_id) + b"binlog.000001"
    await c.send_command(Command.BINLOG_DUMP, body)
    return c


class Reader:
    """A consumer that reads everything and remembers where it is (file, end of the last event)."""

    def __init__(self, client: MysqlClient) -> None:
        self.client = client
        self.file = ""
        self.pos = 0
        self.bytes = 0

    async def run(self, target: asyncio.Future) -> None:
        while True:
            payload = await self.client.read_packet()
            assert payload[0] == 0, payload[:80]
            self.bytes += len(payload) - 1
            type_code = payload[1 + 4]
            flags = struct.unpack_from("<H", payload, 1 + 17)[0]
            if type_code == ROTATE:
                self.file = payload[1 + 19 + 8 : -4].decode()
                self.pos = 4
            elif type_code != HEARTBEAT and not flags & ARTIFICIAL:
                log_pos = struct.unpack_from("<I", payload, 1 + 13)[0]
                if log_pos:
                    self.pos = log_pos
            if target.done() and (self.file, self.pos) == target.result():
                return


async def test_stalled_consumers_stall_neither_the_writer_nor_the_others(tmp_path):
    directory = tmp_path / "binlog"
    writer = BinlogWriter(directory, max_file_size=4 << 20, fsync=FsyncPolicy.never(), server_id=7)
    writer.append_transaction([QueryEvent(b"BEGIN"), XidEvent(1), cts_mark(1)])
    writer.flush()
    notify = asyncio.Event()
    proc = ServeProcess(
        Config(dumper=make_config(directory, max_connections=CLIENTS + 8)),
        directory,
        current_notify=lambda: notify,
        writer_end=lambda: (writer.file, writer.position),
        schema="memory",
    )
    async with proc:
        clients = [await start_dump(proc.port, 100 + i) for i in range(CLIENTS)]
        stalled, live = clients[:STALLED], [Reader(c) for c in clients[STALLED:]]
        target: asyncio.Future = asyncio.get_running_loop().create_future()
        readers = [asyncio.create_task(r.run(target)) for r in live]
        await asyncio.sleep(0.5)  # every dump has begun; the stalled ones' buffers fill
        rss_before = rss_kb(proc.pid)

        # The writer: whole transactions, published after each batch, as the leader does.
        pad = b"INSERT INTO t VALUES ('" + b"x" * TXN_PAD + b"')"
        txns = WRITTEN_MB * (1 << 20) // (TXN_PAD + 200)
        for i in range(txns):
            writer.append_transaction(
                [QueryEvent(b"BEGIN"), QueryEvent(pad, db=b"d"), XidEvent(i + 2), cts_mark(i + 2)]
            )
            if i % 50 == 49:
                writer.flush()
                notify.set()
                notify = asyncio.Event()
                await asyncio.sleep(0)
        writer.flush()
        notify.set()
        target.set_result((writer.file, writer.position))
        assert writer.file != "binlog.000001"  # it rotated while the stalled ones sat on 000001

        # Every reading consumer gets everything, while the stalled ones still hold their dumps.
        await asyncio.wait_for(asyncio.gather(*readers), 300)
        assert all(r.bytes >= WRITTEN_MB << 20 for r in live)
        assert not any(c.closed for c in stalled)
        # What waits for 16 stalled clients that each missed ~16 MB: bounded per client (a
        # send batch of 256 KiB plus the transport's high-water mark), not what they missed;
        # plus the batches dumps share, bounded in all (dumper/server/dump/shared_reads.py).
        grown_mb = (rss_kb(proc.pid) - rss_before) / 1024
        print(f"server process RSS grew {grown_mb:.1f} MB")
        assert grown_mb < STALLED * 1 + (DEFAULT_MAX_BYTES >> 20), (grown_mb, rss_before)

        # The server still answers, and a new consumer reads from the start to the end.
        late = Reader(await start_dump(proc.port, 999))
        await asyncio.wait_for(late.run(target), 120)
        for c in clients:
            c.close()
        late.client.close()
    writer.close()
