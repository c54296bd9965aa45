"""What a process waits for while a dependency is at fault (docs/faults.md): a pause per reason,
since when, for `cdc status`, the metrics and the log (one line when it starts, one when it
ends, never one per retry); and the backoff between retries.

A `Pauses` is passed to whoever may wait (the pipeline's GMS metadata, its writer loop, the CN
heartbeat): no global one. It is read from the event loop and written from worker threads too,
hence the lock."""

from __future__ import annotations

import errno
import logging
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

# The reasons a pipeline pauses for: each is a metric label (`cdc_paused_seconds{reason}`), always
# reported (0 when not paused) so that an alert rule can name it before it ever happened.
GMS = "gms"  # the metadata database: checkpoints, marker history, a start's reads
BINLOG_DISK_FULL = "binlog_disk_full"  # the global binlog's file system
SPILL_DISK_FULL = "spill_disk_full"  # a MergeSource's spill directory
HEARTBEAT = "heartbeat"  # the CN heartbeat (its TSO from the GMS, its XA on the DNs)
STREAM_UNREACHABLE = "stream_unreachable"  # a stream's process on another host (its TCP link)
REASONS = (GMS, BINLOG_DISK_FULL, SPILL_DISK_FULL, HEARTBEAT, STREAM_UNREACHABLE)

# Write errors that free space (or a raised quota) cures: worth waiting for.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


@dataclass(slots=True, frozen=True)
class Pause:
    reason: str
    detail: str  # what exactly waits, and the last error
    since: float  # wall time it began


class Pauses:
    """The pauses in progress, by reason."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now: dict[str, Pause] = {}
        self.count: dict[str, int] = dict.fromkeys(REASONS, 0)  # pauses begun, per reason

    def begin(self, reason: str, detail: str) -> None:
        """`reason` waits (again: the detail is updated, nothing logged)."""
        with self._lock:
            old = self._now.get(reason)
            self._now[reason] = Pause(reason, detail, old.since if old else time.time())
            if old is None:
                self.count[reason] = self.count.get(reason, 0) + 1
        if old is None:
            log.warning("paused (%s): %s", reason, detail)

    def end(self, reason: str) -> None:
        with self._lock:
            old = self._now.pop(reason, None)
        if old is not None:
            log.warning("resumed (%s) after %.1fs: %s", reason, time.time() - old.since, old.detail)

    def active(self, reason: str) -> bool:
        return reason in self._now

    def snapshot(self) -> list[dict]:
        """For the status file: what waits now, oldest first."""
        with self._lock:
            pauses = sorted(self._now.values(), key=lambda p: p.since)
        return [{"reason": p.reason, "detail": p.detail, "since": p.since} for p in pauses]


class Backoff:
    """Exponential delays between retries: `first`, doubled up to `cap`; `reset` after a
    success."""

    def __init__(self, first: float = 0.2, cap: float = 5.0) -> None:
        self.first, self.cap = first, cap
        self._next = first

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return delay

    def reset(self) -> None:
        self._next = self.first
