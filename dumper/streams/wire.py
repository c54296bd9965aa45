"""The splitter → stream writer contract (frames.proto) on its byte stream: one message per
frame (`cdc.frames`, shared with the MergeSource contract)."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from cdc.frames import FrameTooLarge, framed, read_body
from cdc.keys import GlobalKey
from dumper.streams.frames_pb2 import FromStream, Key, ToStream

M = TypeVar("M", bound=Message)

__all__ = ["FromStream", "ToStream", "WireError", "framed", "key_message", "read_frame"]


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


def key_message(key: GlobalKey | None) -> Key:
    return Key(none=True) if key is None else Key(key=list(key))


def message_key(message: Key) -> GlobalKey | None:
    return None if message.none else GlobalKey(*message.key)
