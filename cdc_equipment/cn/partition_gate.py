"""Keeps this process's transactions off partitions that a change (a move, a logical DDL) is
working on: frozen keys, counted, as the cluster's catalogue version says (`membership.py`);
and off everything while the process's lease is not valid (`suspend`)."""

from __future__ import annotations

import asyncio
from collections import Counter

from cdc.cn_protocol.errors import TransactionAborted

PartitionKey = tuple[str, str, int]  # (db, table, partition)


class PartitionGate:
    def __init__(self) -> None:
        self._inflight: Counter[PartitionKey] = Counter()
        # Counted: a DDL and a scale-out may freeze the same partition; one thaw must not end
        # the other's freeze (it did, and a write reached the old copy of a moving partition).
        self._frozen: Counter[PartitionKey] = Counter()
        self._changed = asyncio.Condition()
        self._suspended = False

    async def enter(self, keys: set[PartitionKey], held: set[PartitionKey]) -> bool:
        """Count `keys` as in use by a transaction that already holds `held`. True if this
        had to wait (a placement may have changed meanwhile: route again), False if it returned
        without yielding to the event loop (nothing else ran since the caller's routing)."""
        new = keys - held
        if not new:
            return False
        if not self._changed.locked() and not self._blocked(new):
            self._inflight.update(new)
            held |= new
            return False
        async with self._changed:
            while self._blocked(new):
                if self._suspended and held or any(self._frozen[k] > 0 for k in held):
                    # The change waits for this transaction to end, which would wait for the
                    # change: abort instead (like a deadlock victim).
                    raise TransactionAborted(
                        "a partition this transaction holds is being changed (a move or a "
                        "logical DDL); retry"
                    )
                await self._changed.wait()
            self._inflight.update(new)
            held |= new
        return True

    def _blocked(self, keys: set[PartitionKey]) -> bool:
        return self._suspended or any(self._frozen[k] > 0 for k in keys)

    async def leave(self, held: set[PartitionKey]) -> None:
        if not held:
            return
        async with self._changed:
            self._inflight.subtract(held)
            held.clear()
            self._changed.notify_all()

    async def freeze(self, keys: set[PartitionKey]) -> None:
        """Stop new transactions on `keys` and wait for the running ones to finish."""
        async with self._changed:
            self._frozen.update(keys)
            self._changed.notify_all()  # waiters holding one of `keys` must give way (enter)
            await self._changed.wait_for(lambda: all(self._inflight[k] <= 0 for k in keys))

    async def thaw(self, keys: set[PartitionKey]) -> None:
        async with self._changed:
            self._frozen.subtract(keys)
            self._changed.notify_all()

    def suspend(self) -> None:
        """No new transaction enters (this process may no longer write)."""
        self._suspended = True

    async def resume(self) -> None:
        async with self._changed:
            self._suspended = False
            self._changed.notify_all()
