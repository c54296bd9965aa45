"""MergeSource worker processes spawned ahead of a takeover. Starting Python and importing the
pipeline took 1.5-4 s per worker on a loaded 2-core machine, most of a takeover after the
lease; a follower keeps one idle worker per DN (each waits for its spec on stdin), and the new
leader hands them their specs at once. `[dumper] warm_sources = false` turns this off. They
are forked from a fork server of their own (`[pipeline] fork_server`), which also forks the
new leader's later workers (restarts, a DN added)."""

from __future__ import annotations

import contextlib
import logging

from merge_source import ForkServer, Worker, spawn_worker

log = logging.getLogger(__name__)


class WarmSources:
    def __init__(self, size: int, fork_server: bool = True):
        self.size = size
        self._idle: list[Worker] = []
        self._forks = ForkServer() if fork_server else None
        self._spawn = self._forks.spawn if self._forks is not None else spawn_worker

    async def fill(self) -> None:
        """Spawn workers until `size` idle ones are alive."""
        self._idle = [p for p in self._idle if p.returncode is None]
        while len(self._idle) < self.size:
            self._idle.append(await self._spawn())

    async def take(self) -> Worker:
        """An idle worker if one is alive, else a new one (`SourceProcess`'s `spawn`)."""
        while self._idle:
            proc = self._idle.pop()
            if proc.returncode is None:
                return proc
        return await self._spawn()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for proc in idle:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in idle:
            with contextlib.suppress(Exception):
                await proc.wait()
        if self._forks is not None:
            await self._forks.aclose()
