"""The splitter → stream writer contract (frames.proto) on its byte stream: one message per
frame (`cdc.frames`, shared with the MergeSource contract)."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from cdc.frames import FRAME, FrameTooLarge, framed, read_body
from cdc.keys import GlobalKey
from dumper.streams.frames_pb2 import Batch, FromStream, Key, ToStream

M = TypeVar("M", bound=Message)

__all__ = [
    "FromStream",
    "ToStream",
    "WireError",
    "batch_frame",
    "framed",
    "key_message",
    "read_frame",
]

_BYTES_FIELD_1 = b"\x0a"  # field 1, length-delimited: `ToStream.batch`, and `Batch.events`


class WireError(RuntimeError):
    """A frame that is not what the contract says (a corrupt or foreign byte stream)."""


async def read_frame(reader: asyncio.StreamReader, cls: type[M]) -> M | None:
    """The next message, or None at the end of the stream (the other side is gone)."""
    try:
        body = await read_body(reader)
    except FrameTooLarge as exc:
        raise WireError(str(exc)) from None
    if body is None:
        return None
    try:
        return cls.FromString(body)
    except DecodeError as exc:
        raise WireError(f"a frame that is not a {cls.__name__}: {exc}") from None


def batch_frame(batch: Batch, events: bytes | bytearray) -> tuple[bytes, bytes | bytearray, bytes]:
    """`framed(ToStream(batch=batch))` with `events` (not empty) as the batch's `events`, in
    three pieces to write one after the other: the same bytes (protobuf writes the fields in
    their numbers' order, `events` first), but the events, most of a frame's bytes, are never
    copied into a message, out of it, and into one more buffer for the length in front: a
    stream's transport is handed them as the encoder wrote them."""
    rest = batch.SerializeToString()  # the batch without its events: a few hundred bytes
    events_len = _varint(len(events))
    body = _varint(1 + len(events_len) + len(events) + len(rest))  # the batch's length
    head = _BYTES_FIELD_1 + body + _BYTES_FIELD_1 + events_len
    return FRAME.pack(len(head) + len(events) + len(rest)) + head, events, rest


def _varint(n: int) -> bytes:
    if n < 0x4000:  # (a batch's events under 16 KB: a live rate's batch, the common case)
        return bytes((n,)) if n < 0x80 else bytes((n & 0x7F | 0x80, n >> 7))
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key_message(key: GlobalKey | None) -> Key:
    return Key(none=True) if key is None else Key(key=list(key))


def message_key(message: Key) -> GlobalKey | None:
    return None if message.none else GlobalKey(*message.key)
