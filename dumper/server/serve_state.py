"""What the leader tells the server process (serve_process.py), through a shared file and a
pipe: the seqlock'd `ServeState` (how far the child may serve, whether this process leads, the
term) and the child's `Notifier` over it (`SharedStateNotifier`)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import mmap
import os
import struct
import tempfile
from dataclasses import dataclass

from binlog_writer import file_number
from cdc.tasks import wait_event

# seq, flags, file number, end, term, merged TSO, sure_until, served bound (file number, pos)
_STATE = struct.Struct("<QBxxxIQQQdIxxxxQ")
_HAS_LIMIT, _LEADING, _READ_ONLY, _HAS_BOUND = 1, 2, 4, 8
_READ_TRIES = 100_000  # a write takes well under a microsecond


@dataclass(slots=True, frozen=True)
class ServeView:
    limit: tuple[int, int] | None  # (file number, end) the child may serve up to; None: all
    leading: bool
    read_only: bool
    term: int
    # Every transaction with a smaller TSO is in the files (`Leader.merged_tso`; 0: unknown)
    merged_tso: int = 0
    # Until when (CLOCK_MONOTONIC, the same in both processes) the leader surely holds its HA
    # lease: the ack gate serves unacknowledged data only before then. A deadline rather
    # than a flag, so that a leader whose loop stalls cannot leave it set.
    sure_until: float = math.inf
    # HA: how far a degraded ack gate may serve, as recorded in the GMS for this term
    # (dumper/ha/served_bound.py); None: no bound (a gate outside HA).
    served_bound: tuple[int, int] | None = None


class ServeState:
    """The leader → server state in a shared file, as a seqlock: the writer makes `seq` odd,
    writes the fields, makes it even again; a reader retries a read that saw an odd or changed
    `seq`. One writer (the leader's loop), any number of readers."""

    def __init__(self, fd: int, *, create: bool = False) -> None:
        """`fd`: an open file (unlinked: nothing is left behind, however the leader ends)."""
        if create:
            os.ftruncate(fd, _STATE.size)
        self._map = mmap.mmap(fd, _STATE.size)  # (keeps its own duplicate of fd)
        self._seq = 0

    @classmethod
    def anonymous(cls) -> tuple[ServeState, int]:
        """A new state in an unlinked temporary file, and its fd (for the child's pass_fds)."""
        fd, path = tempfile.mkstemp(prefix="cdc-serve-", suffix=".state")
        os.unlink(path)
        return cls(fd, create=True), fd

    def publish(self, view: ServeView) -> None:
        flags = (
            (_HAS_LIMIT if view.limit is not None else 0)
            | (_LEADING if view.leading else 0)
            | (_READ_ONLY if view.read_only else 0)
            | (_HAS_BOUND if view.served_bound is not None else 0)
        )
        number, end = view.limit or (0, 0)
        bound_number, bound_pos = view.served_bound or (0, 0)
        m = self._map
        self._seq += 1
        m[0:8] = struct.pack("<Q", self._seq)  # odd: being written
        m[8 : _STATE.size] = _STATE.pack(
            self._seq,
            flags,
            number,
            end,
            view.term,
            view.merged_tso,
            view.sure_until,
            bound_number,
            bound_pos,
        )[8:]
        self._seq += 1
        m[0:8] = struct.pack("<Q", self._seq)

    def read(self) -> ServeView:
        m = self._map
        for _ in range(_READ_TRIES):
            seq, flags, number, end, term, merged, sure, b_number, b_pos = _STATE.unpack(
                m[: _STATE.size]
            )
            if seq & 1 or struct.unpack("<Q", m[0:8])[0] != seq:
                continue  # the leader is writing it this instant
            return ServeView(
                (number, end) if flags & _HAS_LIMIT else None,
                bool(flags & _LEADING),
                bool(flags & _READ_ONLY),
                term,
                merged,
                sure,
                (b_number, b_pos) if flags & _HAS_BOUND else None,
            )
        # Odd for good: the leader died in the middle of a write (its stdin EOF ends us soon).
        # Serve nothing meanwhile: no file number is 0.
        return ServeView(
            (0, 0), leading=False, read_only=True, term=-1, sure_until=0.0, served_bound=(0, 0)
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._map.close()


class SharedStateNotifier:
    """The child's `Notifier`: woken by the leader's pipe, bounded by the published end."""

    def __init__(self, state: ServeState) -> None:
        self.state = state
        self._event = asyncio.Event()

    def wake(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        await wait_event(self._event, timeout)

    def merged_tso(self) -> int | None:
        return self.state.read().merged_tso or None

    def visible_end(self, name: str) -> int | None:
        limit = self.state.read().limit
        if limit is None:
            return None
        number, end = limit
        try:
            mine = file_number(name)
        except ValueError:
            return None
        if mine < number:
            return None  # finished before the writer's current file: whole
        return end if mine == number else 0  # a file the leader has not published yet
