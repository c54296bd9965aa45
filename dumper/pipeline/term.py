"""What a Leader is given when it runs one HA term (dumper/ha builds it; the pipeline imports
nothing of HA): the lease term, the fence called before each write, until when the lease is
sure, and the takeover's observer. A Leader without one is the plain, single leader (term 0, no
fence)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dumper.pipeline.leader import Leader


class Takeover(Protocol):
    """Follows a takeover until the new term's first write (HA's `TakeoverTimeline`)."""

    @property
    def done(self) -> bool: ...

    def mark(self, phase: str) -> None:
        """A phase of the start has passed (the Leader's own: schema, checkpoints, sources)."""
        ...

    async def watch(self, leader: Leader) -> None:
        """Run beside the started pipeline until its first write (sources up, caught up)."""
        ...


@dataclass(frozen=True, slots=True)
class Term:
    number: int  # the lease term, for logs and status
    fence: Callable[[], None]  # raises if this process may no longer write (its lease ran out)
    takeover: Takeover | None = None  # None: this process led before, or there is no timeline
    # Until when (monotonic) the lease is surely held (HA's `HaNode.sure_until`): a stream
    # process's ack gate gives up waiting for followers only before then (docs/streams.md).
    sure_until: Callable[[], float] = lambda: math.inf
