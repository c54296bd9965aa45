"""Low/high watermarks: a row committed through the CN into the broadcast logical table
`cdc_backfill.watermarks`. Its commit TSO brackets the reads, and the row itself shows up in the
global binlog, so the backfill can see when the binlog has passed that TSO (a CN heartbeat is
dropped by the merge and would not). Like `cdc check`'s token table, it is an ordinary logical
table: replicas and backfills carry it too. The CN comes from the caller (`CnConnector`): the
backfill writes through the deployment's CN, whichever it is."""

from __future__ import annotations

import asyncio
import uuid

from cdc.cn_protocol.catalogue import Catalogue
from cdc.cn_protocol.client import CnConnector

DB = "cdc_backfill"
TABLE = "watermarks"
CREATE = (
    f"CREATE TABLE IF NOT EXISTS {DB}.{TABLE} (id CHAR(32) NOT NULL PRIMARY KEY, "
    "kind VARCHAR(8) NOT NULL, written_at DATETIME(6) NOT NULL)"
)


async def _write(connect: CnConnector, kind: str) -> tuple[int, Catalogue]:
    async with connect() as cn:
        await cn.execute_ddl(CREATE, broadcast=True)
        async with cn.transaction() as tx:
            await tx.execute(
                f"INSERT INTO {DB}.{TABLE} (id, kind, written_at) VALUES (%s, %s, NOW(6))",
                (uuid.uuid4().hex, kind),
            )
        await cn.reload_catalogue()
        assert tx.commit_tso is not None  # committed: the block ended without an error
        return tx.commit_tso, cn.catalogue


def write(connect: CnConnector, kind: str) -> tuple[int, Catalogue]:
    """Commit one watermark ('low' or 'high'); returns its TSO and the catalogue right after."""
    return asyncio.run(_write(connect, kind))
