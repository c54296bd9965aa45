"""The dump stream's fast path (`scan.split_events` + `DumpClient._read`) over the recorded DN
events framed as MariaDB sends them: every read boundary, rotations, heartbeats, a 17 MB event
split over two packets, and damage named by position."""

from __future__ import annotations

import asyncio
import struct
import zlib

import pytest

from cdc.protocol import BinlogPosition, DnEvent, DumpClient, DumpError, DumpSettings
from cdc.protocol.dump_stream import split_events
from tests.merge_source.record_fixtures import load_events

RECORDED = [DnEvent(f, p, d) for f, p, d in load_events()]
ROTATE, HEARTBEAT, WRITE_ROWS = 4, 27, 23
ARTIFICIAL = 0x20


def event(code: int, body: bytes, log_pos: int, flags: int = 0) -> bytes:
    data = bytearray(19) + body + b"\0\0\0\0"
    struct.pack_into("<IBIIIH", data, 0, 0, code, 1, len(data), log_pos, flags)
    struct.pack_into("<I", data, len(data) - 4, zlib.crc32(data[:-4]))
    return bytes(data)


def rotate(file: str, pos: int, log_pos: int = 0, flags: int = ARTIFICIAL) -> bytes:
    return event(ROTATE, struct.pack("<Q", pos) + file.encode(), log_pos, flags)


def packets(payload: bytes) -> bytes:
    """MySQL framing: chunks of 0xFFFFFF bytes, an empty one after an exact multiple."""
    out, seq, view = [], 0, memoryview(payload)
    while True:
        chunk = bytes(view[:0xFFFFFF])
        view = view[0xFFFFFF:]
        out.append(struct.pack("<I", len(chunk) | seq << 24) + chunk)
        seq = (seq + 1) & 0xFF
        if len(chunk) < 0xFFFFFF:
            return b"".join(out)


def stream(events: list[DnEvent], big: bytes | None = None) -> bytes:
    """Artificial rotate per file, a real rotate closing file 1, a heartbeat, EOF at the end."""
    out, file = [], None
    for i, e in enumerate(events):
        if e.file != file:
            if file is not None:
                real = rotate(e.file, 4, log_pos=events[i - 1].end + 40, flags=0)
                out.append(packets(b"\0" + real))
            out.append(packets(b"\0" + rotate(e.file, 4)))
            file = e.file
        out.append(packets(b"\0" + e.data))
        if i == 10:
            out.append(packets(b"\0" + event(HEARTBEAT, b"binlog.000001", e.end, ARTIFICIAL)))
    if big is not None:
        out.append(packets(b"\0" + big))
    out.append(b"\x05\x00\x00\x00\xfe\x00\x00\x02\x00")  # EOF
    return b"".join(out)


class Chunks:
    """What the socket would deliver, cut every `size` bytes."""

    def __init__(self, data: bytes, size: int):
        self.parts = [data[i : i + size] for i in range(0, len(data), size)]

    async def read_raw(self, size: int = 0) -> bytes:
        if not self.parts:
            raise ConnectionResetError("end of test stream")
        return self.parts.pop(0)


def read_all(data: bytes, size: int) -> tuple[list[tuple[str, list[bytes]]], DumpClient]:
    client = DumpClient(DumpSettings("h", 1, "u", "", 1), BinlogPosition("binlog.000001", 4))

    async def run():
        return [b async for b in client._read(Chunks(data, size))]

    return asyncio.run(run()), client


@pytest.mark.parametrize("size", [1, 5, 23, 100, 4096, 1 << 20])
def test_every_read_boundary_gives_the_recorded_events(size: int):
    batches, client = read_all(stream(RECORDED), size)
    got = [DnEvent(f, e.pos, e.data) for f, b in batches for e in _events(f, b)]
    assert got == RECORDED
    assert all(len({e.file for e in _events(f, b)}) == 1 for f, b in batches)
    assert client.position == BinlogPosition(RECORDED[-1].file, RECORDED[-1].end)


def _events(file: str, batch: list[bytes]) -> list[DnEvent]:
    from cdc.protocol import event_pos

    return [DnEvent(file, event_pos(e), e) for e in batch]


def test_an_event_of_17_mb_crosses_as_two_packets():
    last = RECORDED[-1]
    big = event(WRITE_ROWS, bytes(range(256)) * (17 << 12), 0)
    big = event(WRITE_ROWS, bytes(range(256)) * (17 << 12), last.end + len(big))
    batches, client = read_all(stream(RECORDED, big), 1 << 18)
    assert batches[-1][1][-1] == big
    assert client.position == BinlogPosition(last.file, last.end + len(big))


def test_split_events_stops_at_what_it_does_not_know():
    data = stream(RECORDED[:5])
    events, pos = split_events(data, 0, True)
    assert events == [] and pos == 0  # the artificial rotate first: for the caller
    first = len(packets(b"\0" + rotate("binlog.000001", 4)))
    events, pos = split_events(data, first, True)
    assert events == [e.data for e in RECORDED[:5]] and data[pos + 4] == 0xFE  # stops at EOF


def test_a_damaged_event_is_named_by_its_position():
    bad = bytearray(RECORDED[3].data)
    bad[25] ^= 0xFF
    events = [*RECORDED[:3], DnEvent(RECORDED[3].file, RECORDED[3].pos, bytes(bad))]
    with pytest.raises(
        DumpError, match=rf"binlog.000001:{RECORDED[3].pos}: event type \d+ failed its CRC32"
    ):
        read_all(stream(events), 4096)
    short = bytearray(RECORDED[3].data)
    struct.pack_into("<I", short, 9, len(short) + 1)
    events[3] = DnEvent(RECORDED[3].file, RECORDED[3].pos, bytes(short))
    with pytest.raises(DumpError, match=rf":{RECORDED[3].pos}: event size \d+ != packet size"):
        read_all(stream(events), 4096)


def test_split_events_checks_the_crc_of_events_of_every_size():
    """The compiled check (zcrc.pxd: a table walk for short events, zlib's from 512 bytes on)
    accepts every intact event and stops at a damaged one, at every size around that switch."""
    sizes = [*range(23, 1100), 4099, 70_001]
    events = [
        event(WRITE_ROWS, bytes(range(256)) * (size // 256 + 1), 4)[: size - 4] for size in sizes
    ]
    events = [e[:9] + struct.pack("<I", len(e) + 4) + e[13:] for e in events]
    events = [e + struct.pack("<I", zlib.crc32(e)) for e in events]
    data = b"".join(packets(b"\0" + e) for e in events)
    got, pos = split_events(data, 0, True)
    assert got == events and pos == len(data)
    for e in events[::97]:
        bad = bytearray(e)
        bad[len(bad) // 2] ^= 0x01
        assert split_events(packets(b"\0" + bytes(bad)), 0, True) == ([], 0)
