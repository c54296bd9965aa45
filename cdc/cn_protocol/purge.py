"""Purges old commit records and tombstones from `__cdc_tx_log__` (the DELETEs are private
events in the DN binlogs too), never those of a transaction that is still in doubt."""

from __future__ import annotations

import logging

from cdc.cn_protocol import schema
from cdc.cn_protocol.context import ProtocolContext
from cdc.cn_protocol.recovery import scan
from cdc.tso_layout import compose, physical_ms

log = logging.getLogger(__name__)


async def purge_commit_records(ctx: ProtocolContext, older_than_s: float) -> int:
    """Delete records whose TSO is more than `older_than_s` old on every storage DN."""
    # In-doubt transactions are listed before the DELETE: one prepared later has a fresh TSO.
    in_doubt, unreachable = await scan(ctx)
    now = await ctx.tso.next()
    horizon = compose(max(0, physical_ms(now) - int(older_than_s * 1000)))
    keep = sorted(in_doubt) or [0]
    placeholders = ", ".join(["%s"] * len(keep))
    sql = (
        f"DELETE FROM `{schema.PRIVATE_DB}`.`{schema.TX_LOG}` WHERE commit_tso < %s "
        f"AND txn_id NOT IN ({placeholders})"
    )
    deleted = 0
    for dn in ctx.catalogue.dns:
        if dn in unreachable:
            continue
        async with ctx.pools.connection(dn) as conn, conn.cursor() as cur:
            await cur.execute(sql, (horizon, *keep))
            deleted += cur.rowcount
    if deleted:
        log.info("purged %d commit records older than %ss", deleted, older_than_s)
    return deleted
