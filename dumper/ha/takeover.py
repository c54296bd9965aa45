"""The phases of one HA takeover, with their times, for the log: when a takeover is slow, the
line says where the time went (the lease, recovering the copy, reading the DNs again, ...).
The new term's Leader is given it as its `Takeover` (dumper/pipeline/term.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from dumper.pipeline import Leader

log = logging.getLogger(__name__)

# A takeover that has not written its first transaction this long after the old leader was
# last heard logs what it has done so far (and once more when it does write).
SLOW_TAKEOVER_S = 10.0


@dataclass(slots=True)
class TakeoverTimeline:
    """Monotonic times of named phases, counted from `origin`: when the old leader was last
    heard (the follower's last copied byte; its dump heartbeats every 0.5 s), or when this
    process noticed the lease was free if it copied nothing."""

    dumper_id: int
    origin: float
    origin_what: str
    term: int = 0
    marks: list[tuple[str, float]] = field(default_factory=list)
    done: bool = False
    _slow_logged: bool = False

    def mark(self, phase: str, at: float | None = None) -> None:
        self.marks.append((phase, time.monotonic() if at is None else at))
        log.debug("takeover of term %d: %s", self.term, phase)

    def render(self) -> str:
        parts, prev = [], self.origin
        for phase, at in self.marks:
            parts.append(f"{phase} +{at - self.origin:.2f}s ({at - prev:.2f})")
            prev = at
        return (
            f"dumper {self.dumper_id}: takeover of term {self.term}, counted from {self.origin_what}: "
            + ", ".join(parts)
        )

    def finish(self) -> None:
        """The first transaction of the new term is written: log the whole timeline once."""
        if not self.done:
            self.mark("first write")
            self.done = True
            log.info("%s", self.render())

    def check_slow(self) -> None:
        if not self.done and not self._slow_logged:
            if time.monotonic() - self.origin > SLOW_TAKEOVER_S:
                self._slow_logged = True
                log.info("%s; no transaction written yet", self.render())

    async def watch(self, leader: Leader) -> None:
        """Mark when each source is connected and has read past the resume key (the old
        leader's last transaction), and the first write; log slow takeovers meanwhile."""
        start_key = leader.written_key
        started: set[int] = set()
        connected: set[int] = set()
        caught_up: set[int] = set()
        while not self.done:
            for dn, source in list(leader.sources.items()):
                status = source.status()
                if dn not in started and status.get("pid") and status.get("state") != "starting":
                    started.add(dn)  # the worker process runs and reported
                    self.mark(f"{source.name} process up")
                if dn not in connected and status.get("state") == "up":
                    connected.add(dn)
                    self.mark(f"{source.name} connected")
                wm = leader.joint.merger.watermark(dn) if leader.joint is not None else None
                if (
                    dn not in caught_up
                    and wm is not None
                    and (start_key is None or wm >= start_key)
                ):
                    caught_up.add(dn)
                    self.mark(f"{source.name} caught up ({status.get('events', 0)} events read)")
            if leader.written_key != start_key:
                self.finish()
            self.check_slow()
            await asyncio.sleep(0.02)
