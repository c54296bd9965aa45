"""Iterate raw events from a bytes buffer or a file: walk headers, verify CRCs, follow the
FDE, stop cleanly at a partial tail. Event lengths are bounded by the bytes present and by
`max_event_size`, so absurd headers can neither loop nor make us allocate."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from .checksum import verify
from .constants import (
    BINLOG_MAGIC,
    CHECKSUM_LEN,
    DEFAULT_MAX_EVENT_SIZE,
    FORMAT_DESCRIPTION_EVENT,
    HEADER_LEN,
)
from .errors import CodecError
from .events import Event, body_view, decode_event
from .fde import FormatDescription
from .header import EventHeader


@dataclass(slots=True)
class RawEvent:
    pos: int  # offset of the event's first byte in the file
    header: EventHeader
    data: memoryview  # the whole event, header + body + CRC

    @property
    def type_code(self) -> int:
        return self.header.type_code

    @property
    def end(self) -> int:
        return self.pos + self.header.event_size

    def body(self, fde: FormatDescription) -> memoryview:
        return body_view(self.data, fde)


class EventReader:
    """Walks events of one binlog file image.

    After iteration, `end` is the offset just past the last whole event and `tail` the number
    of bytes of a partial trailing event (0 if none). `fde` is the file's FORMAT_DESCRIPTION.
    """

    def __init__(
        self,
        buf: bytes | bytearray | memoryview,
        *,
        file: str | None = None,
        start: int | None = None,
        fde: FormatDescription | None = None,
        verify_checksum: bool = True,
        allow_partial_tail: bool = False,
        check_log_pos: bool = True,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> None:
        self.buf = memoryview(buf)
        self.file = file
        self.fde = fde
        self.verify_checksum = verify_checksum
        self.allow_partial_tail = allow_partial_tail
        self.check_log_pos = check_log_pos
        self.max_event_size = max_event_size
        if start is None:
            if len(self.buf) < len(BINLOG_MAGIC):
                if allow_partial_tail and bytes(self.buf) == BINLOG_MAGIC[: len(self.buf)]:
                    start = len(self.buf)
                else:
                    raise CodecError("file is shorter than the binlog magic", file=file, pos=0)
            elif self.buf[:4] != BINLOG_MAGIC:
                raise CodecError("not a binlog file (bad magic)", file=file, pos=0)
            else:
                start = len(BINLOG_MAGIC)
        self.start = start
        self.end = start
        self.tail = 0

    def __iter__(self) -> Iterator[RawEvent]:
        buf, n = self.buf, len(self.buf)
        pos = self.start
        while pos < n:
            remaining = n - pos
            if remaining < HEADER_LEN:
                self._partial(pos, f"truncated event header ({remaining} of {HEADER_LEN} bytes)")
                return
            header = EventHeader.unpack(buf, pos)
            size = header.event_size
            is_fde = header.type_code == FORMAT_DESCRIPTION_EVENT
            crc_len = (
                CHECKSUM_LEN if is_fde or (self.fde is not None and self.fde.has_checksum) else 0
            )
            if size < HEADER_LEN + crc_len:
                raise CodecError(
                    f"event_size {size} is smaller than header + checksum", file=self.file, pos=pos
                )
            if size > self.max_event_size:
                raise CodecError(
                    f"event_size {size} exceeds max_event_size {self.max_event_size} (corrupt header?)",
                    file=self.file,
                    pos=pos,
                )
            if size > remaining:
                self._partial(pos, f"event_size {size} runs past the end ({remaining} bytes left)")
                return
            if self.check_log_pos and header.log_pos not in (0, pos + size):
                raise CodecError(
                    f"log_pos {header.log_pos} != end offset {pos + size} (corrupt or not at an event start)",
                    file=self.file,
                    pos=pos,
                )
            data = buf[pos : pos + size]
            if is_fde:
                self.fde = self._read_fde(data, pos)
            elif self.fde is None:
                raise CodecError(
                    f"event type {header.type_code} before any FORMAT_DESCRIPTION",
                    file=self.file,
                    pos=pos,
                )
            if self.verify_checksum and (is_fde or self.fde.has_checksum):
                try:
                    verify(data)
                except CodecError as e:
                    raise e.located(file=self.file, pos=pos) from None
            pos += size
            self.end = pos
            yield RawEvent(pos - size, header, data)

    def _read_fde(self, data: memoryview, pos: int) -> FormatDescription:
        try:
            return FormatDescription.parse(data[HEADER_LEN:])
        except CodecError as e:
            raise e.located(file=self.file, pos=pos) from None

    def _partial(self, pos: int, why: str) -> None:
        if not self.allow_partial_tail:
            raise CodecError(why, file=self.file, pos=pos)
        self.end = pos
        self.tail = len(self.buf) - pos

    def decoded(self, *, strict: bool = False) -> Iterator[Event]:
        """Iterate fully decoded events (SLOW path)."""
        for raw in self:
            assert self.fde is not None
            yield decode_event(raw.data, self.fde, pos=raw.pos, file=self.file, strict=strict)


def iter_events(buf: bytes | bytearray | memoryview, **kwargs) -> Iterator[RawEvent]:
    return iter(EventReader(buf, **kwargs))


def read_file(path: str | os.PathLike[str], **kwargs) -> tuple[bytes, EventReader]:
    """Load a binlog file and return (bytes, reader over them). The file size bounds memory."""
    with open(path, "rb") as f:
        data = f.read()
    kwargs.setdefault("file", os.fspath(path))
    return data, EventReader(data, **kwargs)
