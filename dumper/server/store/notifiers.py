"""How a waiting dump learns that the active file grew (`Notifier`), and the notifiers of each
set-up: none (poll), an in-process writer's event, the leader's current event."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from cdc.tasks import wait_event


class Notifier(Protocol):
    """Wakes waiting dumps when the active file grows. `wait` may return early or on timeout;
    the sender re-checks the file either way."""

    async def wait(self, timeout: float) -> None: ...

    def visible_end(self, name: str) -> int | None:
        """Where a dump of file `name` must stop for now (a transaction being streamed into it
        is not whole yet), or None: everything in it may be sent."""
        ...

    def merged_tso(self) -> int | None:
        """Every transaction with a smaller TSO is in the files already; None: not known here
        (no merge in this process's reach). Snapshot reads wait for it past their watermark."""
        ...


class PollNotifier:
    """No writer in the process: just sleep; the sender polls the file size."""

    async def wait(self, timeout: float) -> None:
        await asyncio.sleep(timeout)

    def visible_end(self, name: str) -> int | None:
        return None

    def merged_tso(self) -> int | None:
        return None


class EventNotifier:
    """For an in-process writer: call `notify()` after each append (cheap, from the loop)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()  # waiters hold the old (set) event; new waits block again

    async def wait(self, timeout: float) -> None:
        await wait_event(self._event, timeout)

    def visible_end(self, name: str) -> int | None:
        return None

    def merged_tso(self) -> int | None:
        return None


class CurrentEventNotifier:
    """For a writer that sets, then replaces, an asyncio.Event after each append (the Leader's
    `notify` attribute): `CurrentEventNotifier(lambda: leader.notify)`."""

    def __init__(
        self,
        current: Callable[[], asyncio.Event],
        visible: Callable[[str], int | None] | None = None,
        merged: Callable[[], int] | None = None,
    ) -> None:
        self._current = current
        self._visible = visible  # the writer's `visible_end`, when it streams huge transactions
        self._merged = merged  # the leader's `merged_tso`

    def visible_end(self, name: str) -> int | None:
        return self._visible(name) if self._visible is not None else None

    def merged_tso(self) -> int | None:
        return (self._merged() or None) if self._merged is not None else None

    async def wait(self, timeout: float) -> None:
        await wait_event(self._current(), timeout)
