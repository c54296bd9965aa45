"""Runs K concurrent asyncio tasks calling one workload step for a duration, optionally at a
target rate, and counts what happened."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pymysql

from cdc.cn_protocol.errors import CnError

log = logging.getLogger(__name__)

Step = Callable[[random.Random], Awaitable[None]]


@dataclass(slots=True)
class WorkloadStats:
    committed: int = 0
    failed: int = 0
    elapsed_s: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def tps(self) -> float:
        return self.committed / self.elapsed_s if self.elapsed_s else 0.0

    def summary(self, name: str) -> str:
        text = (
            f"{name}: {self.committed} transactions in {self.elapsed_s:.1f}s = {self.tps:.1f} TPS"
            f" ({self.failed} failed)"
        )
        if self.errors:
            text += "; errors: " + ", ".join(f"{k} x{v}" for k, v in self.errors.most_common(5))
        return text


# A workload's set-up (its tables and first rows) waits out a DN or the GMS restarting for up
# to this long: a load started while the cluster is being disturbed must not end before it began.
SETUP_TIMEOUT_S = 60.0


async def set_up(setup: Callable[[], Awaitable[None]], timeout_s: float = SETUP_TIMEOUT_S) -> None:
    """`setup()` (idempotent) until it succeeds; a failure that outlasts `timeout_s` is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await setup()
        except (CnError, pymysql.err.MySQLError, OSError) as exc:
            if time.monotonic() > deadline:
                raise
            log.warning("workload set-up failed, retried: %s", exc)
            await asyncio.sleep(1.0)


async def run_workload(
    step: Step,
    threads: int,
    duration_s: float,
    tps: float | None = None,
    seed: int | None = None,
    max_transactions: int | None = None,
    stop: asyncio.Event | None = None,
) -> WorkloadStats:
    """Run until `duration_s` has passed, `max_transactions` steps have started (benches
    that compare runs need the same amount of work in each) or `stop` is set (steps under way
    finish: cancelling one mid-commit would leave prepared branches behind)."""
    stats = WorkloadStats()
    started = 0
    start = time.monotonic()
    deadline = start + duration_s
    master = random.Random(seed)
    # Each task paces itself to tps/threads; no rate limit without --tps.
    interval = threads / tps if tps else 0.0

    async def worker(rng: random.Random) -> None:
        nonlocal started
        next_at = time.monotonic()
        while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
            if max_transactions is not None:
                if started >= max_transactions:
                    return
                started += 1
            try:
                await step(rng)
                stats.committed += 1
            except (CnError, pymysql.err.MySQLError) as exc:
                stats.failed += 1
                stats.errors[
                    type(exc).__name__
                    + (
                        f"({exc.args[0]})"
                        if isinstance(exc, pymysql.err.MySQLError) and exc.args
                        else ""
                    )
                ] += 1
                log.debug("workload step failed: %s", exc)
            if interval:
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    await asyncio.gather(*(worker(random.Random(master.random())) for _ in range(threads)))
    stats.elapsed_s = time.monotonic() - start
    return stats
