"""Spill files: raw binlog events of a huge group or held branch kept on local disk, not in memory.

A `SpillFile` is an anonymous temp file (unlinked at creation, so a crash leaves nothing behind
and its space is freed as soon as the last object using it is gone). Events are appended through
a small write buffer and read back by `EventSpan`, a contiguous byte range of whole events.
Events delimit themselves: every event carries its size at header offset 9, renamed TABLE_MAPs
included (the renamer keeps it right), so a span needs no index.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cdc.binlog.constants import HEADER_LEN
from cdc.binlog.header import event_size

DEFAULT_SPILL_BYTES = 64 << 20
_WRITE_BUFFER = 1 << 20
_READ_CHUNK = 1 << 20


class SpillError(RuntimeError):
    """A spill file does not hold what was written to it (disk trouble, or a torn event)."""


class SpillFile:
    """An append-only anonymous temp file of events."""

    __slots__ = ("_fd", "_buffer", "size", "_finalizer", "__weakref__")

    def __init__(self, directory: str | None = None, *, _fd: int | None = None, _size: int = 0):
        if _fd is None:
            _fd, path = tempfile.mkstemp(prefix="cdc-spill-", dir=directory)
            os.unlink(path)
        self._fd = _fd
        self._buffer = bytearray()
        self.size = _size  # bytes appended, buffered ones included
        # Closes the fd (and so frees the disk space) when the file object is collected.
        self._finalizer = weakref.finalize(self, os.close, _fd)

    @classmethod
    def adopt(cls, path: str) -> SpillFile:
        """Take over a handoff file another process wrote (see `write_handoff`): opened, then
        unlinked, so from here on it is an anonymous spill file like any other."""
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            raise SpillError(f"cannot open spill handoff file {path}: {exc}") from None
        os.unlink(path)
        return cls(_fd=fd, _size=os.fstat(fd).st_size)

    def append(self, event: bytes) -> None:
        if len(event) < HEADER_LEN or event_size(event) != len(event):
            raise SpillError(
                f"cannot spill an event whose header size is not its length ({len(event)})"
            )
        self._buffer += event
        self.size += len(event)
        if len(self._buffer) >= _WRITE_BUFFER:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            done = self.size - len(self._buffer)
            view = memoryview(self._buffer)
            while view:
                n = os.pwrite(self._fd, view, done)
                view, done = view[n:], done + n
            view.release()
            self._buffer.clear()

    def iter_range(self, start: int, end: int) -> Iterator[bytes]:
        """The events stored in bytes [start, end), one `bytes` each, read in large chunks."""
        self.flush()
        fd = self._fd
        pos = start
        while pos < end:
            chunk = os.pread(fd, min(_READ_CHUNK, end - pos), pos)
            n, i = len(chunk), 0
            while n - i >= HEADER_LEN:
                size = event_size(chunk, i)
                if size > n - i:
                    break
                yield chunk[i : i + size]
                i += size
            if i == 0:  # one event larger than a chunk: read it whole
                size = event_size(chunk) if n >= HEADER_LEN else 0
                if size < HEADER_LEN or pos + size > end:
                    raise SpillError(f"spill range [{start}, {end}) ends inside an event at {pos}")
                event = os.pread(fd, size, pos)
                if len(event) != size:
                    raise SpillError(f"spill file truncated at {pos} (event of {size} bytes)")
                yield event
                i = size
            pos += i

    def close(self) -> None:
        self._finalizer()


@dataclass(frozen=True, slots=True)
class EventSpan:
    """Whole events stored contiguously in a spill file."""

    spill: SpillFile
    start: int
    end: int
    count: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def __iter__(self) -> Iterator[bytes]:
        return self.spill.iter_range(self.start, self.end)

    def __len__(self) -> int:
        return self.count


class SpanWriter:
    """Appends events to a spill file; `span()` is everything appended through it. Writers of
    one file must not interleave (a span is one contiguous range)."""

    __slots__ = ("spill", "start", "end", "count")

    def __init__(self, spill: SpillFile):
        self.spill = spill
        self.start = self.end = spill.size
        self.count = 0

    def append(self, event: bytes) -> None:
        spill = self.spill
        if spill.size != self.end:
            raise SpillError("two span writers interleaved on one spill file")
        spill.append(event)
        self.end = spill.size
        self.count += 1

    def extend(self, events: Iterable[bytes]) -> None:
        for e in events:
            self.append(e)

    def __len__(self) -> int:
        return self.count

    def span(self) -> EventSpan:
        return EventSpan(self.spill, self.start, self.end, self.count)


HANDOFF_PREFIX = "cdc-handoff-"


def write_handoff(spans: Iterable[EventSpan], directory: str | None) -> tuple[str, list[int]]:
    """Copy `spans` into one new named file for another process to `adopt`; returns its path
    and each span's start offset in it. Streamed: memory stays at one read chunk."""
    fd, path = tempfile.mkstemp(prefix=f"{HANDOFF_PREFIX}{os.getpid()}-", dir=directory)
    starts = []
    try:
        with os.fdopen(fd, "wb", buffering=_WRITE_BUFFER) as f:
            for span in spans:
                starts.append(f.tell())
                for event in span:
                    f.write(event)
    except BaseException:
        os.unlink(path)
        raise
    return path, starts


def sweep_handoffs(directory: str | None) -> int:
    """Remove handoff files whose writer process is gone and that nobody adopted (a crash
    between the two processes' steps); returns how many."""
    removed = 0
    root = directory or tempfile.gettempdir()
    for name in os.listdir(root):
        if not name.startswith(HANDOFF_PREFIX):
            continue
        try:
            pid = int(name[len(HANDOFF_PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, name))
                removed += 1
    return removed
