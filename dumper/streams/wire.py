"""Framing of the splitter → stream writer contract (frames.proto): a little-endian u32 length,
then one serialized message."""

from __future__ import annotations

import asyncio
import struct
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from cdc.keys import GlobalKey
from dumper.streams.frames_pb2 import FromStream, Key, ToStream

FRAME = struct.Struct("<I")
# A batch holds at most what MergeJoint handed out at once (queue_batches × a DN batch): far
# below this; a larger length is a corrupt stream, not a batch to buffer.
MAX_FRAME = 1 << 30

M = TypeVar("M", bound=Message)

__all__ = ["FRAME", "FromStream", "ToStream", "WireError", "framed", "key_message", "read_frame"]


class WireError(RuntimeError):
    """A frame that is not what the contract says (a corrupt or foreign byte stream)."""


def framed(message: Message) -> bytes:
    body = message.SerializeToString()
    return FRAME.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader, cls: type[M]) -> M | None:
    """The next message, or None at the end of the stream (the other side is gone)."""
    try:
        (n,) = FRAME.unpack(await reader.readexactly(FRAME.size))
        if n > MAX_FRAME:
            raise WireError(f"a frame of {n} bytes")
        body = await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        return None
    try:
        return cls.FromString(body)
    except DecodeError as exc:
        raise WireError(f"a frame that is not a {cls.__name__}: {exc}") from None


def key_message(key: GlobalKey | None) -> Key:
    return Key(none=True) if key is None else Key(key=list(key))


def message_key(message: Key) -> GlobalKey | None:
    return None if message.none else GlobalKey(*message.key)
