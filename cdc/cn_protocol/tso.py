"""TSO oracle: 64-bit hybrid timestamps `physical_ms << 22 | logical`, allocated in GMS.

Every allocation is one conditional UPDATE on the GMS row (see docs/cn.md, "TSO"), so any TSO
fetched after another one was returned is larger, whichever CN process asked. Requests that
arrive while a round trip is in flight are batched into the next one: cheap and still correct.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pymysql

from cdc.cn_protocol.dn_conn import DnConnection
from cdc.cn_protocol.errors import TsoError
from cdc.tso_layout import LOGICAL_BITS  # the layout and its conversions: cdc/tso_layout.py

log = logging.getLogger(__name__)


def advance_sql(catalogue_db: str) -> str:
    """One statement: take max(last + n, now) under the row lock and return it via insert_id."""
    return (
        f"UPDATE `{catalogue_db}`.`cn_tso` SET tso = LAST_INSERT_ID(GREATEST(tso + %s, "
        f"CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) << {LOGICAL_BITS})) WHERE id = 1"
    )


class TsoOracle:
    """Hands out strictly increasing TSOs; one GMS connection, requests batched per round trip."""

    def __init__(self, connect: Callable[[], Awaitable[DnConnection]], catalogue_db: str):
        self._connect = connect
        self._sql = advance_sql(catalogue_db)
        self._conn: DnConnection | None = None
        self._pending: list[asyncio.Future[int]] = []
        self._runner: asyncio.Task | None = None

    async def next(self) -> int:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append(fut)
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return await fut

    async def _run(self) -> None:
        # A request joins the batch of the *next* round trip, never one already in flight: that
        # round trip starts after every earlier answer was delivered, so its TSOs are larger.
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                last = await self._advance(len(batch))
            except Exception as exc:  # noqa: BLE001 - handed to every waiter
                for fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            first = last - len(batch) + 1
            for i, fut in enumerate(batch):
                if not fut.done():
                    fut.set_result(first + i)

    async def _advance(self, n: int) -> int:
        for attempt in (1, 2):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await self._connect()
                async with self._conn.cursor() as cur:
                    await cur.execute(self._sql, (n,))
                    if cur.rowcount != 1:
                        raise TsoError("GMS has no TSO row: run `cdc cn init` first")
                    return int(cur.lastrowid)
            except pymysql.err.MySQLError as exc:
                self._drop()
                if attempt == 2:
                    raise TsoError(f"cannot fetch a TSO from GMS: {exc}") from exc
                log.warning("TSO round trip failed (%s); reconnecting to GMS", exc)
        raise AssertionError("unreachable")

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    async def close(self) -> None:
        if self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)
        self._drop()
