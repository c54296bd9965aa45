"""Heartbeats: a TSO transaction on `__cdc_heartbeat__` touching every DN, every interval; the
background task also purges old commit records now and then."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from cdc.cn_protocol import schema
from cdc.cn_protocol.context import ProtocolContext
from cdc.cn_protocol.purge import purge_commit_records
from cdc.cn_protocol.transaction import PrivateTransaction

log = logging.getLogger(__name__)

# How long `stop()` lets a beat in flight finish before cancelling it.
STOP_GRACE_S = 10.0

HEARTBEAT_SQL = (
    f"INSERT INTO `{schema.PRIVATE_DB}`.`{schema.HEARTBEAT}` (cn_id, txn_id, sent_at) "
    "VALUES (%s, %s, NOW(6)) ON DUPLICATE KEY UPDATE txn_id = VALUES(txn_id), "
    "sent_at = VALUES(sent_at)"
)


async def beat(ctx: ProtocolContext) -> int:
    """One heartbeat; returns its TSO."""
    tx = PrivateTransaction(ctx, kind="heartbeat")
    async with tx:
        await tx.execute_private(HEARTBEAT_SQL, (ctx.instance_id, tx.txn_id))
    return tx.commit_tso


class Heartbeat:
    """The background heartbeat task; started and stopped explicitly."""

    def __init__(self, ctx: ProtocolContext):
        self._ctx = ctx
        self._task: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self.last_tso: int | None = None
        self.count = 0
        # Told each beat's outcome (None: it succeeded): the dumper shows failing beats as a
        # pause. Beats that keep failing (the GMS or a DN away) are logged when they start
        # failing and when they work again, not every interval.
        self.on_beat: Callable[[Exception | None], None] | None = None
        self.failing_since: float | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if not self.running:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._loop(), name="cn-heartbeat")

    async def stop(self) -> None:
        """End the task between beats. A beat cancelled between XA PREPARE and XA COMMIT would
        leave prepared branches on every DN: they hold the heartbeat row (the next beat waits
        on its lock) and the merge (nothing committed later is released) until a recovery."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        try:
            await asyncio.wait({task}, timeout=STOP_GRACE_S)
        finally:  # also when stop() itself is cancelled: never leave the task running
            if not task.done():
                log.warning("heartbeat still running after stop: cancelled")
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _loop(self) -> None:
        cfg = self._ctx.config.cn
        interval = cfg.heartbeat_interval_ms / 1000
        loop = asyncio.get_running_loop()
        next_purge = loop.time() + cfg.purge_interval_s
        while not self._stopping.is_set():
            started = loop.time()
            try:
                self.last_tso = await beat(self._ctx)
                self.count += 1
                if self.failing_since is not None:
                    log.warning(
                        "heartbeats work again after %.1fs", time.time() - self.failing_since
                    )
                    self.failing_since = None
                if self.on_beat is not None:
                    self.on_beat(None)
                if loop.time() >= next_purge:
                    next_purge = loop.time() + cfg.purge_interval_s
                    await purge_commit_records(self._ctx, cfg.commit_record_retention_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a missed beat must not end the task
                if self.failing_since is None:
                    self.failing_since = time.time()
                    log.warning("heartbeat failed (retried every interval): %s", exc)
                else:
                    log.debug("heartbeat failed: %s", exc)
                if self.on_beat is not None:
                    self.on_beat(exc)
            pause = max(0.0, interval - (loop.time() - started))
            # asyncio.timeout, not wait_for (invariant 8): on 3.11 wait_for can swallow a cancel
            # that lands as the wait ends, and a stopped heartbeat would beat on.
            try:
                async with asyncio.timeout(pause):
                    await self._stopping.wait()
            except TimeoutError:
                pass
