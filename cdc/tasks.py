"""Stopping asyncio tasks for sure, and waiting for an event for a bounded time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task], grace: float = 10.0) -> None:
    """Cancel `tasks` and wait until they have ended, cancelling again while they run: on
    Python 3.11 a cancel that lands as an inner `wait_for` completes can be swallowed (library
    code may use it), and a task stopped once would then run on and a shutdown that awaits it
    would hang. After `grace` seconds the survivors are named in the
    log and left behind. Their exceptions are not raised: the caller is already stopping."""
    pending = {t for t in tasks if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(0.5, max(deadline - loop.time(), 0)))
        if pending and loop.time() >= deadline:
            log.error(
                "tasks still running %.0fs after cancel: %s", grace, [t.get_name() for t in pending]
            )
            return


async def wait_event(event: asyncio.Event, timeout: float) -> None:
    """Until `event` is set, at most `timeout` seconds (no error when the time is up). Not
    `wait_for`: on 3.11 it can swallow a cancel."""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        pass
