"""The CN heartbeat the dumper's pipeline process runs: the global binlog only advances with
heartbeats, so the process that merges writes them when no CN process does. The same process
settles, now and then, the branches left prepared by writers that are gone or cut off (a CN,
the heartbeat of a leader that was fenced): such a branch holds its DN's MergeSource, and so
the whole global binlog, until someone settles it."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from cdc.config import Config, NodeConfig
from cdc.pauses import HEARTBEAT, Backoff, Pauses

if TYPE_CHECKING:
    from cdc.cn_protocol import ProtocolNode

log = logging.getLogger(__name__)

# How often the heartbeat CN looks for storage DNs added by another CN process.
STORAGE_POLL_S = 1.0
# How often the leader looks for branches left prepared (docs/faults.md, "Partitions"); one
# is settled once seen prepared for `[cn] lease_ms` (a CN silent that long counts as dead).
IN_DOUBT_EVERY_S = 5.0


async def heartbeats(
    config: Config, dn_address: Callable[[int], NodeConfig | None], pauses: Pauses
) -> None:
    """The global binlog only advances with heartbeats: run them here so that it stays live
    when no CN process is sending any. A writer of the CN protocol's own transactions
    (`ProtocolNode`), not a whole CN. A GMS or DN away at start is waited for (a pause), and
    beats that fail are the `heartbeat` pause until one succeeds."""
    from cdc.cn_protocol import ProtocolNode

    backoff = Backoff()
    while True:
        node = ProtocolNode(config, pool_size=4)
        try:
            # Settle branches orphaned by a crash (ours included: a heartbeat killed between
            # PREPARE and XA COMMIT would otherwise hold the merge forever).
            await node.start(recover=True)
            break
        except Exception as exc:  # noqa: BLE001 - the GMS or a DN away: wait for it
            pauses.begin(HEARTBEAT, f"CN heartbeat not started: {exc}")
            await node.close()
            await asyncio.sleep(backoff.next())
    pauses.end(HEARTBEAT)
    node.heartbeat.on_beat = functools.partial(_beat_pause, pauses)
    try:
        node.start_heartbeat()
        async with asyncio.TaskGroup() as tasks:  # until cancelled
            tasks.create_task(_follow_storage(node, dn_address), name="heartbeat-storage")
            tasks.create_task(_settle_in_doubt(node), name="heartbeat-recovery")
    finally:
        await node.stop_heartbeat()
        await node.close()


async def _follow_storage(
    node: ProtocolNode, dn_address: Callable[[int], NodeConfig | None]
) -> None:
    """Heartbeats must touch a DN that another CN process added (`cdc cn add-dn`) too: the
    merge waits for every DN's watermark, and without its own traffic the new DN's would stay
    at its StorageChange marker, holding the global binlog for ever. Its address comes from
    the marker: the pipeline knows it once it merges the DN (`dn_address`)."""
    from cdc.cn_protocol import StorageDns

    waiting: set[int] = set()
    while True:
        await asyncio.sleep(STORAGE_POLL_S)
        try:
            storage = await node.store.storage_dns()
        except Exception as exc:  # GMS away for a moment: the heartbeat itself reports it
            log.debug("storage DNs not read: %s", exc)
            continue
        added = [dn for dn in storage if dn not in node.ctx.catalogue.dns]
        if not added:
            continue
        nodes = [dn_address(dn) for dn in added]
        if any(n is None for n in nodes):
            if waiting != set(added):
                log.info("storage DNs %s added: heartbeats wait for their addresses", added)
                waiting = set(added)
            continue
        for dn in nodes:
            node.pools.add_node(dn)  # type: ignore[arg-type]  # none is None (above)
        node.ctx.catalogue = StorageDns(storage)
        waiting = set()
        log.info("heartbeats touch dn%s too from now on", ", dn".join(map(str, added)))


async def _settle_in_doubt(node: ProtocolNode) -> None:
    """Every IN_DOUBT_EVERY_S, settle what stayed prepared over a CN lease, ending owner
    sessions that hold their branch attached (`cdc.cn_protocol.recovery`)."""
    grace_s = max(1.0, node.config.cn.lease_ms / 1000)
    while True:
        await asyncio.sleep(IN_DOUBT_EVERY_S)
        try:
            report = await node.recover_stale(grace_s)
        except Exception as exc:  # noqa: BLE001 - a DN or the GMS away: the next round
            log.debug("in-doubt recovery: %s", exc)
            continue
        if report.committed or report.rolled_back or report.skipped:
            log.warning("in-doubt recovery: %s", report.summary())


def _beat_pause(pauses: Pauses, error: Exception | None) -> None:
    if error is None:
        pauses.end(HEARTBEAT)
    else:
        pauses.begin(HEARTBEAT, f"CN heartbeats fail: {error}")
