"""Stopping asyncio tasks for sure, and waiting for an event for a bounded time."""

from __future__ import annotations

import asyncio
import logging
import signal
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


def dump_tasks_on(sig: int = signal.SIGUSR1) -> None:
    """On `sig`, log every task of the running loop with the chain of awaits it is suspended
    in: what a process that seems hung waits for (a test sends it before it gives up on it)."""
    loop = asyncio.get_running_loop()

    def dump() -> None:
        for task in asyncio.all_tasks(loop):
            log.warning("task %s awaits:\n  %s", task.get_name(), "\n  ".join(_awaits(task)))

    loop.add_signal_handler(sig, dump)


def _awaits(task: asyncio.Task) -> list[str]:
    """file:line function of each coroutine from the task's down to the innermost await
    (`Task.print_stack` shows the outermost frame only)."""
    out, coro = [], task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            out.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out or [repr(task)]
