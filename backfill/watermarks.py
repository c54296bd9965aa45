"""Low/high watermarks: a row committed through the CN into the broadcast logical table
`cdc_backfill.watermarks`. Its commit TSO brackets the reads, and the row itself shows up in the
global binlog, so the backfill can see when the binlog has passed that TSO (a CN heartbeat is
dropped by the merge and would not). Like `cdc check`'s token table, it is an ordinary logical
table: replicas and backfills carry it too."""

from __future__ import annotations

import asyncio
import uuid

from cdc.cn.catalogue import Catalogue
from cdc.config import Config

DB = "cdc_backfill"
TABLE = "watermarks"
CREATE = (
    f"CREATE TABLE IF NOT EXISTS {DB}.{TABLE} (id CHAR(32) NOT NULL PRIMARY KEY, "
    "kind VARCHAR(8) NOT NULL, written_at DATETIME(6) NOT NULL)"
)


async def _write(config: Config, kind: str) -> tuple[int, Catalogue]:
    from cdc.cn import ComputeNode

    cn = ComputeNode(config, pool_size=4)
    await cn.start(recover=False)
    try:
        await cn.execute_ddl(CREATE, broadcast=True)
        async with cn.transaction() as tx:
            await tx.execute(
                f"INSERT INTO {DB}.{TABLE} (id, kind, written_at) VALUES (%s, %s, NOW(6))",
                (uuid.uuid4().hex, kind),
            )
        await cn.reload_catalogue()
        return tx.commit_tso, cn.catalogue
    finally:
        await cn.close()


def write(config: Config, kind: str) -> tuple[int, Catalogue]:
    """Commit one watermark ('low' or 'high'); returns its TSO and the catalogue right after."""
    return asyncio.run(_write(config, kind))
