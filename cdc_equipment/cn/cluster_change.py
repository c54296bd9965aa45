"""A catalogue change every CN process honours: the owner's side of `membership.py`.

    async with cluster_change(ctx, store, "DDL on shop.items", progress) as change:
        await change.freeze(keys)   # every live CN stopped writing them; dead CNs settled
        ...                         # the change itself; save the catalogue
    # leaving publishes the new version: every CN reloads, then writes again

Writes to the frozen partitions pause from the freeze until each CN has applied the new
version; `cdc bench cn-change` measures that stall under load.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from cdc.cn_protocol import recovery
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.errors import CatalogueError
from cdc_equipment.cn.context import CnContext
from cdc_equipment.cn.membership import Member
from cdc_equipment.cn.partition_gate import PartitionKey

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass(slots=True)
class ClusterChange:
    ctx: CnContext
    what: str
    progress: Progress
    frozen: set[PartitionKey] = field(default_factory=set)
    thawed: bool = False  # `thaw()` published the catalogue after the change: leaving only unlocks
    keep_frozen: bool = False  # a job failed half-way: leaving unlocks, its takeover thaws

    @property
    def _timeout_s(self) -> float:
        return self.ctx.config.cn.change_timeout_ms / 1000

    async def freeze(self, keys: set[PartitionKey]) -> None:
        """Freeze `keys` (besides those already frozen) on every live CN, and settle the
        in-doubt branches of dead CNs: afterwards nobody writes there until the change ends."""
        self.frozen |= keys
        self.thawed = False
        membership = self.ctx.membership
        assert membership is not None
        version = await membership.publish(self.frozen, release=False)
        try:
            live = await self.wait_acknowledged(version, "the freeze")
        except CatalogueError as exc:
            raise CatalogueError(
                f"{exc}; a long transaction on a frozen partition? Nothing was changed"
            ) from None
        await self._settle_dead({m.instance_id for m in live})

    async def thaw(self, *, release: bool = False) -> int:
        """Publish a version with nothing frozen (the lock kept unless `release`: a job records
        that it is thawed before it ends) and return once this process runs it, every live CN
        soon after."""
        membership = self.ctx.membership
        assert membership is not None
        version = await membership.publish(set(), release=release)
        await self._wait_applied(version)
        # Like a DDL on one MySQL server: once it returns, every session sees it.
        try:
            await self.wait_acknowledged(version, "the new catalogue")
        except CatalogueError as exc:
            log.warning("%s (the change itself is done)", exc)
        self.frozen = set()
        self.thawed = True
        return version

    async def _wait_applied(self, version: int) -> None:
        try:
            async with asyncio.timeout(self._timeout_s):
                await self.ctx.membership.wait_applied(version)
        except TimeoutError:
            raise CatalogueError(
                f"{self.what}: done, but this CN could not load catalogue version {version} "
                "(GMS unreachable?)"
            ) from None

    async def wait_acknowledged(self, version: int, what: str) -> list[Member]:
        """Until every live CN runs catalogue `version`; a CN that does not in time is named."""
        membership = self.ctx.membership
        assert membership is not None
        deadline = time.monotonic() + self._timeout_s
        said = ""
        while True:
            members = await membership.live()
            pending = [m for m in members if m.acked_version < version]
            line = f"{len(members) - len(pending)}/{len(members)} CNs acknowledged {what}"
            if line != said:
                self.progress(line)
                said = line
            if not pending:
                return members
            if time.monotonic() > deadline:
                raise CatalogueError(
                    f"{self.what}: {pending[0]} did not acknowledge {what} within "
                    f"{self._timeout_s:g} s (it renews its lease: it is alive)"
                    + (f"; {len(pending) - 1} more did not either" if len(pending) > 1 else "")
                )
            await asyncio.sleep(membership.interval_s / 2)

    async def _settle_dead(self, live: set[int]) -> None:
        """Commit or roll back the prepared branches of CNs that are not live members (a
        SIGKILLed CN's branch on a partition about to be copied must not commit later on the
        old copy). Seen prepared in two scans apart: an in-flight commit of a live writer that
        is not a member (the Dumper's heartbeats) is over by then."""
        first, _ = await recovery.scan(self.ctx)
        dead = {t for t in first if t >> 32 not in live}
        if not dead:
            return
        await asyncio.sleep(self.ctx.membership.interval_s * 5)
        again, _ = await recovery.scan(self.ctx)
        dead &= set(again)
        deadline = time.monotonic() + self._timeout_s
        while dead:
            report = await recovery.recover(self.ctx, only=dead)
            if report.committed or report.rolled_back:
                self.progress(f"settled dead CNs' transactions: {report.summary()}")
            dead = set(report.skipped)  # attached to a session its DN has not closed yet
            if dead and time.monotonic() > deadline:
                raise CatalogueError(
                    f"{self.what}: in-doubt transactions of dead CNs not settled within "
                    f"{self._timeout_s:g} s: {report.summary()}"
                )
            if dead:
                await asyncio.sleep(0.2)


async def reload_catalogue(ctx: CnContext, store: CatalogueStore) -> None:
    """Re-read the catalogue, learning the addresses of DNs added since this process started."""
    catalogue = await store.load()
    if any(not ctx.pools.knows(dn) for dn in catalogue.dns):
        for node in await store.dns():
            if not ctx.pools.knows(node.id):
                ctx.pools.add_node(node)
    ctx.catalogue = catalogue


@contextlib.asynccontextmanager
async def cluster_change(
    ctx: CnContext, store: CatalogueStore, what: str, progress: Progress | None = None
) -> AsyncIterator[ClusterChange]:
    """Own the change lock for `what` (waiting for another CN's change to end), with the
    catalogue re-read; on leaving, publish the new version with nothing frozen and return once
    this process runs it (so its next statement sees the change)."""

    def say(line: str) -> None:
        (progress or log.info)(f"{what}: {line}")

    membership = ctx.membership
    assert membership is not None, "the CN is not started"
    deadline = time.monotonic() + ctx.config.cn.change_timeout_ms / 1000
    said = ""
    while True:
        locked, holder = await membership.try_lock(what)
        if locked:
            break
        if holder != said:
            say(f"waiting for the change {holder}")
            said = holder
        if time.monotonic() > deadline:
            raise CatalogueError(f"{what}: the change {holder} did not end in time")
        await asyncio.sleep(membership.interval_s)
    change = ClusterChange(ctx, what, say)
    try:
        await reload_catalogue(ctx, store)  # another CN's change may have ended just now
        yield change
    finally:
        await _leave(change)


async def _leave(change: ClusterChange) -> None:
    """Release the lock; unless `thaw()` did, publish the new version with nothing frozen first."""
    membership = change.ctx.membership
    if change.thawed or change.keep_frozen:
        await membership.release()
        return
    was_frozen = bool(change.frozen)
    version = await change.thaw(release=True)
    if was_frozen:
        change.progress(f"done: catalogue version {version}")
