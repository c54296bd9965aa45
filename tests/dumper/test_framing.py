"""`framing.frame_whole_events`, the server's per-event dump loop (compiled; test_compiled runs
this file as plain Python too): packets exactly as MySQL frames them, and it stops where the
caller must look (partial event, bogus size, an event whose packet must be split)."""

from __future__ import annotations

import struct

from cdc.binlog.events import QueryEvent, encode_event
from cdc.protocol.packets import MAX_CHUNK
from dumper.server.dump.framing import frame_whole_events


def packets(events: list[bytes], seq: int) -> bytes:
    out = b""
    for ev in events:
        out += struct.pack("<I", len(ev) + 1)[:3] + bytes((seq,)) + b"\x00" + ev
        seq = (seq + 1) & 0xFF
    return out


EVENTS = [encode_event(QueryEvent(b"x" * i)) for i in range(0, 600, 7)]


def test_whole_events_framed_with_wrapping_sequence_ids():
    data = b"".join(EVENTS)
    framed, off, n, seq = frame_whole_events(data, 250)
    assert (bytes(framed), off, n) == (packets(EVENTS, 250), len(data), len(EVENTS))
    assert seq == (250 + len(EVENTS)) & 0xFF


def test_it_stops_before_a_partial_or_bogus_event():
    whole = b"".join(EVENTS[:3])
    for tail in (EVENTS[3][:5], EVENTS[3][:30], struct.pack("<IBIIIH", 0, 2, 1, 7, 0, 0)):
        framed, off, n, seq = frame_whole_events(whole + tail, 0)
        assert (bytes(framed), off, n, seq) == (packets(EVENTS[:3], 0), len(whole), 3, 3)
    assert frame_whole_events(b"", 9) == (bytearray(), 0, 0, 9)


def test_an_event_whose_packet_needs_splitting_is_left_to_the_caller():
    big = struct.pack("<IBIIIH", 0, 2, 1, MAX_CHUNK - 1, 0, 0)  # header only: size says 16 MB
    framed, off, n, _ = frame_whole_events(EVENTS[0] + big + b"\0" * 64, 0)
    assert (off, n) == (len(EVENTS[0]), 1)
