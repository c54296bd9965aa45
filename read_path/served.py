"""What the read path needs of the global binlog a server serves (owned here, as the consumer's
boundary: the dumper's served-files store fits it, a test may pass its own): the files to scan
from a read's position, and the writer's progress to wait on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from read_path.change_index import SegmentIndex


class Event(Protocol):
    """One whole event of a file: its bytes and where it starts."""

    data: bytes
    pos: int


class ServedFiles(Protocol):
    def names(self) -> list[str]:
        """The files, oldest first (binlog.index)."""
        ...

    def events(self, name: str, start: int = ...) -> Iterator[Event]:
        """The whole events of `name` from `start` (a torn tail is not one)."""
        ...

    def read_fde(self, name: str) -> Event:
        """The FORMAT_DESCRIPTION_EVENT that starts `name`."""
        ...


class ChangeIndex(Protocol):
    """The changed keys' index of the served files (`change_index.py`), where the server has
    built it: a read as of an old point uses it instead of scanning what it covers."""

    def segments(self, name: str, start: int) -> Sequence[SegmentIndex]:
        """The indexed segments of `name` that begin at or after `start`, in order, each
        checked against the file now."""
        ...

    def reader(self, name: str) -> AbstractContextManager[Callable[[int, int], bytes]]:
        """`read(pos, size)`: bytes of `name` (a before-image the index points at)."""
        ...


class Progress(Protocol):
    """The writer's progress as the server sees it (dumper/server/store/notifiers.py)."""

    async def wait(self, timeout: float) -> None:
        """Until the files may have grown, or `timeout`."""
        ...

    def merged_tso(self) -> int | None:
        """The TSO the leader's merge has passed (heartbeats move it, never written); None:
        not known."""
        ...
