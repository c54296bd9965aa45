"""A corrupt event in a DN's binlog (one byte flipped on disk, as a bad sector would) stops that
DN's MergeSource with an error naming the DN, the file and the position — no silent skip, no
reconnect loop. Real server: MariaDB sends the bytes as they are on disk (master_verify_checksum
is off by default), so our CRC32 check is what catches it."""

from __future__ import annotations

import asyncio

import pytest

from cdc.binlog.reader import EventReader
from cdc.protocol import BinlogPosition, DumpClient, DumpError, DumpSettings
from cdc_equipment.local_cluster.testing import throwaway_server
from merge_source.fragment import Watermark
from merge_source.processor import SourceProcessor
from merge_source.source import MergeSource

WRITE_ROWS = 23


@pytest.fixture(scope="module")
def corrupt_dn(tmp_path_factory):
    """A server whose closed binlog.000001 has one flipped byte inside its 3rd Write_rows event;
    yields (server, position of that event)."""
    server = throwaway_server(tmp_path_factory.mktemp("corrupt"), server_id=700, name="dn7")
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE c")
            cur.execute("CREATE TABLE c.t (id INT PRIMARY KEY, v VARCHAR(40))")
            for i in range(5):
                cur.execute("INSERT INTO c.t VALUES (%s, %s)", (i, "x" * 30))
            cur.execute("FLUSH BINARY LOGS")  # binlog.000001 is closed: nothing rewrites it
        path = server.home / "binlog" / "binlog.000001"
        data = bytearray(path.read_bytes())
        rows = [e for e in EventReader(bytes(data)) if e.header.type_code == WRITE_ROWS]
        bad = rows[2]
        data[bad.pos + 19 + 10] ^= 0x5A  # inside the body, header intact
        path.write_bytes(data)
        yield server, bad.pos
    finally:
        server.stop()


def settings(server) -> DumpSettings:
    return DumpSettings("127.0.0.1", server.port, "root", "", server_id=9700, name=server.name)


async def test_the_dump_client_names_dn_and_file(corrupt_dn):
    server, pos = corrupt_dn
    client = DumpClient(settings(server), BinlogPosition("binlog.000001", 4))
    good = 0

    async def read():
        nonlocal good
        async for batch in client.batches():
            good += len(batch)

    with pytest.raises(DumpError) as info:
        await asyncio.wait_for(read(), 30)  # a reconnect loop would time out here
    message = str(info.value)
    print(f"\ncorrupt event at binlog.000001:{pos}; the error: {message}")
    assert "dn7" in message and "binlog.000001" in message and "CRC32" in message, message
    assert client.reconnects == 0


async def test_the_error_names_the_corrupt_events_position(corrupt_dn):
    server, pos = corrupt_dn
    client = DumpClient(settings(server), BinlogPosition("binlog.000001", 4))
    with pytest.raises(DumpError) as info:
        await asyncio.wait_for(_drain(client), 30)
    assert f"binlog.000001:{pos}" in str(info.value)


async def _drain(client: DumpClient) -> None:
    async for _ in client.batches():
        pass


async def test_the_merge_source_stops_and_keeps_the_error(corrupt_dn):
    """The MergeSource task ends with the error (the pipeline process exits with it) and emitted
    nothing from the corrupt event on."""
    server, pos = corrupt_dn
    processor = SourceProcessor(dn_id=7, dn_name=server.name)
    queue: asyncio.Queue = asyncio.Queue(maxsize=1000)
    source = MergeSource(settings(server), processor, BinlogPosition("binlog.000001", 4), queue)
    with pytest.raises(DumpError, match=r"dn7 .*binlog\.000001"):
        await asyncio.wait_for(source.run(), 30)
    assert isinstance(source.error, DumpError)
    items = []
    while not queue.empty():
        items += queue.get_nowait()
    checkpoints = [w.checkpoint for w in items if isinstance(w, Watermark) and w.checkpoint]
    # A restart must read the corrupt event again (and stop again), never resume past it.
    assert all((c.file, c.pos) <= ("binlog.000001", pos) for c in checkpoints), checkpoints
