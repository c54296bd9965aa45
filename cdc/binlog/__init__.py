"""Binlog event codec: header, event registry, CRC32, event bodies and row images.
Pure functions of bytes; no I/O. Fast path (raw rewrite) in `fastpath`, slow path in `row_image`."""

from .constants import EventFlag, EventType
from .errors import CodecError, NotSupportedError
from .events import Event, cts_mark, decode_event, encode_event, parse_cts
from .fde import FormatDescription, mysql57_fde
from .header import EventHeader
from .reader import EventReader, RawEvent, iter_events, read_file

__all__ = [
    "CodecError",
    "Event",
    "EventFlag",
    "EventHeader",
    "EventReader",
    "EventType",
    "FormatDescription",
    "NotSupportedError",
    "RawEvent",
    "cts_mark",
    "decode_event",
    "encode_event",
    "iter_events",
    "mysql57_fde",
    "parse_cts",
    "read_file",
]
