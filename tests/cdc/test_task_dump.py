"""`cdc.tasks.dump_tasks_on`: a process that seems hung says, on SIGUSR1, what each of its
tasks awaits, down to the innermost await (a test sends it before it gives up on a process)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from cdc.tasks import dump_tasks_on


async def _innermost(event: asyncio.Event) -> None:
    await event.wait()


async def _outer(event: asyncio.Event) -> None:
    await _innermost(event)


async def test_each_task_is_logged_with_its_chain_of_awaits(caplog):
    caplog.set_level(logging.WARNING, logger="cdc.tasks")
    dump_tasks_on(signal.SIGUSR1)
    event = asyncio.Event()
    task = asyncio.create_task(_outer(event), name="stuck")
    try:
        await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.sleep(0.05)
        text = "\n".join(r.getMessage() for r in caplog.records if "stuck" in r.getMessage())
        assert "_outer" in text and "_innermost" in text and "locks.py" in text, text
    finally:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGUSR1)
        event.set()
        await task
