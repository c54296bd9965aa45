"""MergeSource worker processes spawned ahead of a takeover. Starting Python and importing the
pipeline took 1.5-4 s per worker on a loaded 2-core machine, most of a takeover after the
lease; a follower keeps one idle worker per DN (each waits for its spec on stdin), and the new
leader hands them their specs at once. `[dumper] warm_sources = false` turns this off."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from merge_source.source_process import spawn_worker

log = logging.getLogger(__name__)


class WarmSources:
    def __init__(self, size: int):
        self.size = size
        self._idle: list[asyncio.subprocess.Process] = []

    async def fill(self) -> None:
        """Spawn workers until `size` idle ones are alive."""
        self._idle = [p for p in self._idle if p.returncode is None]
        while len(self._idle) < self.size:
            self._idle.append(await spawn_worker())

    async def take(self) -> asyncio.subprocess.Process:
        """An idle worker if one is alive, else a new one (`SourceProcess`'s `spawn`)."""
        while self._idle:
            proc = self._idle.pop()
            if proc.returncode is None:
                return proc
        return await spawn_worker()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for proc in idle:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in idle:
            with contextlib.suppress(Exception):
                await proc.wait()
