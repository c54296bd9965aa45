"""The length-prefixed frames both stage contracts travel in (cdc/frames.py): a message comes
back whole, the end of the stream (even inside a frame) is None, and a length past MAX_FRAME is
refused before anything is buffered."""

from __future__ import annotations

import asyncio

import pytest
from google.protobuf.wrappers_pb2 import StringValue, UInt64Value

from cdc.frames import FRAME, MAX_FRAME, FrameTooLarge, framed, read_body


def reader_of(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def test_frames_round_trip_and_end():
    one, two = UInt64Value(value=7), StringValue(value="stream 1")
    reader = reader_of(framed(one) + framed(two))
    assert UInt64Value.FromString(await read_body(reader)) == one
    assert StringValue.FromString(await read_body(reader)) == two
    assert await read_body(reader) is None


async def test_a_frame_cut_short_is_the_end():
    data = framed(UInt64Value(value=1 << 40))
    assert await read_body(reader_of(data[:-1])) is None
    assert await read_body(reader_of(data[:2])) is None


async def test_a_length_past_the_bound_is_refused():
    with pytest.raises(FrameTooLarge, match=str(MAX_FRAME + 1)):
        await read_body(reader_of(FRAME.pack(MAX_FRAME + 1)))
