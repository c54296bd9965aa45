"""Length-prefixed frames: how the pipeline's processes carry a stage contract over a byte stream
(a pipe, a socket). A frame is a little-endian u32 length, then that many bytes of one message
(a serialized protobuf of the contract: merge_source/frames.proto between a MergeSource process
and the merge, dumper/streams/frames.proto between the merge and a stream's process)."""

from __future__ import annotations

import asyncio
import struct

from google.protobuf.message import Message

FRAME = struct.Struct("<I")
# The largest frame a reader accepts. A batch holds at most what one side hands out at once
# (a MergeSource's batch, what MergeJoint released at once): far below this; a spilled statement
# travels as a file's path, not in a frame. A larger length is a corrupt or foreign stream, not
# a batch to buffer.
MAX_FRAME = 1 << 30


class FrameTooLarge(RuntimeError):
    """A length past MAX_FRAME: the byte stream is not (or no longer) frames."""


def framed(message: Message) -> bytes:
    """`message` as one frame."""
    body = message.SerializeToString()
    return FRAME.pack(len(body)) + body


async def read_body(reader: asyncio.StreamReader) -> bytes | None:
    """The next frame's body, or None at the end of the stream (the other side is gone; a
    frame cut short counts as its end too)."""
    try:
        (n,) = FRAME.unpack(await reader.readexactly(FRAME.size))
        if n > MAX_FRAME:
            raise FrameTooLarge(f"a frame of {n} bytes (at most {MAX_FRAME})")
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        return None
