"""The served files' index of changed keys (read_path/change_index.py), kept in memory: built a
segment at a time in a worker thread as the files grow (never on the event loop the sessions
and dumps share, never on a dump's path), for the newest INDEX_BUDGET bytes of the files. It
costs about one scan of every byte written, so it is built only once a read has started more
than a segment back (a read as of an old point, a transaction pinned long ago): until then
nothing; that read scans, and the next ones use the index.

Derived data, never trusted over the file: each segment is checked against the file before a
read uses it (the CRC of its last bytes; a purged file's segments are dropped with it, a file
truncated or rewritten after a crash loses the segments that no longer match, and they are
built again), and a read that finds an image where the index said one would be checks it walks
to its size. Nothing is written to disk: a restarted server builds it again."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import os
from collections.abc import Callable, Iterator

from cdc.binlog.fde import FormatDescription
from dumper.server.store.binlog_files import BinlogFiles
from dumper.server.store.notifiers import Notifier
from read_path import SEGMENT_BYTES, SegmentIndex, build_segment, tail_crc

log = logging.getLogger(__name__)
INDEX_BUDGET = 4 << 30  # the newest files indexed, in bytes of binlog (older ones are scanned)
IDLE_WAIT_S = 1.0


class ChangeIndexes:
    def __init__(
        self,
        files: BinlogFiles,
        segment_bytes: int = SEGMENT_BYTES,
        budget: int = INDEX_BUDGET,
    ) -> None:
        self.files = files
        self.segment_bytes = segment_bytes
        self.budget = budget
        self._segments: dict[str, list[SegmentIndex]] = {}
        self._tried: dict[str, int] = {}  # an active file's size when its tail was too short
        self._task: asyncio.Task | None = None
        self.failed = 0  # segments whose build failed (left to the scan)
        self.wanted = False  # a read started more than a segment back: build from then on
        self._wanted: asyncio.Event | None = None

    # -- what a read asks ----------------------------------------------------------------------
    def segments(self, name: str, start: int = 4) -> list[SegmentIndex]:
        """`name`'s segments that begin at or after `start` and still agree with the file; one
        that does not is dropped with those after it (and they are built again)."""
        if not self.wanted:
            self._want(name, start)
        segs = self._segments.get(name)
        if not segs:
            return []
        first = bisect.bisect_left([s.begin for s in segs], start)
        try:
            with self.reader(name) as read:
                for i in range(first, len(segs)):
                    if tail_crc(read, segs[i].end) != segs[i].tail_crc:
                        log.warning(
                            "change index of %s:%d disagrees with the file", name, segs[i].end
                        )
                        del segs[i:]
                        break
        except OSError:
            return []
        return segs[first:]

    def _want(self, name: str, start: int) -> None:
        """The first read from more than a segment back starts the building."""
        try:
            names = self.files.names()
            old = name != names[-1] or self.files.size(name) - start > self.segment_bytes
        except Exception:  # purged underneath: the read will say so
            return
        if old:
            self.wanted = True
            if self._wanted is not None:
                self._wanted.set()

    @contextlib.contextmanager
    def reader(self, name: str) -> Iterator[Callable[[int, int], bytes]]:
        with open(self.files.path(name), "rb") as f:
            fd = f.fileno()
            yield lambda pos, size: os.pread(fd, size, pos)

    def nbytes(self) -> int:
        """What the index holds, about."""
        return sum(s.nbytes() for segs in self._segments.values() for s in segs)

    # -- building ------------------------------------------------------------------------------
    def start(self, notifier: Notifier) -> None:
        self._wanted = asyncio.Event()
        if self.wanted:
            self._wanted.set()
        self._task = asyncio.create_task(self._run(notifier), name="change-index")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self, notifier: Notifier) -> None:
        assert self._wanted is not None
        await self._wanted.wait()
        while True:
            try:
                built = await self.step()
            except Exception:
                log.exception("building the change index failed; reads scan instead")
                built = False
            if not built:
                await notifier.wait(IDLE_WAIT_S)
                await asyncio.sleep(0.2)  # a busy writer wakes the wait at once

    async def step(self) -> bool:
        """Build the next segment due, if any (in a worker thread); whether one was."""
        due = self._due()
        if due is None:
            return False
        name, begin, finished, size = due
        try:
            seg = await asyncio.to_thread(self._build, name, begin, finished)
        except Exception as exc:  # a purge underneath it, a file that does not parse
            log.info("change index of %s from %d not built: %r", name, begin, exc)
            self.failed += 1
            self._tried[name] = size  # not again until it grows (or is finished)
            return False
        if seg is None:
            self._tried[name] = size
            return False
        self._tried.pop(name, None)
        segs = self._segments.setdefault(name, [])
        if (segs[-1].end if segs else 4) == begin:
            segs.append(seg)
        return True

    def _due(self) -> tuple[str, int, bool, int] | None:
        """The first segment to build of the newest files within the budget: (file, where it
        begins, whether the file is finished, its size now)."""
        names = self.files.names()
        for gone in set(self._segments) - set(names):
            del self._segments[gone]
        sizes: list[tuple[str, int]] = []
        total = 0
        for name in reversed(names):
            try:
                size = self.files.size(name)
            except Exception:
                continue
            total += size
            if total > self.budget and sizes:
                break
            sizes.append((name, size))
        kept = {name for name, _ in sizes}
        for old in set(self._segments) - kept:
            del self._segments[old]
        for name, size in reversed(sizes):
            segs = self._segments.get(name)
            begin = segs[-1].end if segs else 4
            finished = name != names[-1]
            if begin >= size:
                continue
            tried = self._tried.get(name)
            if tried is not None and (size - tried < self.segment_bytes // 4) and not finished:
                continue
            if tried is not None and finished and tried == size:
                continue
            if not finished and size - begin < self.segment_bytes:
                continue
            return name, begin, finished, size
        return None

    def _build(self, name: str, begin: int, finished: bool) -> SegmentIndex | None:
        fde = FormatDescription.parse(self.files.read_fde(name).data[19:])
        with self.reader(name) as read:
            return build_segment(
                name,
                begin,
                self.files.events(name, begin),
                fde,
                finished,
                read,
                self.segment_bytes,
            )
