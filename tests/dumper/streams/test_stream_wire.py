"""The merge → stream frames (dumper/streams/wire.py): a batch written in pieces, its events
never copied into a message, is the frame protobuf itself would write, byte for byte."""

from __future__ import annotations

import pytest

from dumper.streams.frames_pb2 import Batch, ToStream
from dumper.streams.wire import batch_frame, framed


# around the varint boundaries of the events' and the batch's lengths
@pytest.mark.parametrize("size", [1, 100, 127, 128, 16_000, 16_383, 16_384, 2_097_152, 3_000_001])
def test_a_batch_frame_in_pieces_is_protobufs_frame(size):
    events = bytearray((i * 7 + size) % 251 for i in range(size))
    rest = Batch(progress=[7, 1, 2, 1 << 60], event_count=size // 3)
    rest.ends.extend(range(1, size, max(1, size // 50)))
    rest.gtids.extend([0, 3])
    rest.tsos.extend([1 << 50, (1 << 50) + 1])
    whole = Batch()
    whole.CopyFrom(rest)
    whole.events = bytes(events)
    pieces = batch_frame(rest, events)
    assert pieces[1] is events, "the events go as they are, not copied"
    assert b"".join(pieces) == framed(ToStream(batch=whole))
    assert ToStream.FromString(b"".join(pieces)[4:]).batch == whole
