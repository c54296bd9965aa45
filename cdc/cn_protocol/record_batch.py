"""Group commit of commit records: the records that concurrent transactions write on one DN go
in one multi-row INSERT (one round trip, one binlog group, one InnoDB commit) instead of one
each, like the TSO batching. A record never waits for a timer: it joins the next INSERT while
one is in flight on that DN (docs/cn.md, "Commit records in batches").

Why it is safe: each row is still written after its transaction's branches were prepared and
its TSO fetched, and before any of its XA COMMITs; an INSERT is atomic (every row or none), so
"the primary's row exists" still decides each transaction on its own. MergeSource reads every
record of a binlog group (the processor loops over them)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pymysql

from cdc.cn_protocol import schema
from cdc.cn_protocol.dn_pool import DnPools

ER_DUP_ENTRY = 1062


@dataclass(slots=True)
class _Pending:
    row: tuple[int, int, str]  # (txn_id, commit_tso, participants)
    done: asyncio.Future[None]


class CommitRecords:
    """Per (DN, statement): pending records and the task writing them."""

    def __init__(self, pools: DnPools):
        self._pools = pools
        self._pending: dict[tuple[int, bool], list[_Pending]] = {}
        self._writers: dict[tuple[int, bool], asyncio.Task] = {}

    async def write(self, dn_id: int, row: tuple[int, int, str], upsert: bool) -> None:
        """Write one record (the primary's `INSERT`, or a secondary's upsert); raises what the
        one-row statement would have raised (ER_DUP_ENTRY: a recovery tombstone is there)."""
        key = (dn_id, upsert)
        entry = _Pending(row, asyncio.get_running_loop().create_future())
        self._pending.setdefault(key, []).append(entry)
        writer = self._writers.get(key)
        if writer is None or writer.done():
            self._writers[key] = asyncio.create_task(self._run(key))
        await entry.done

    async def _run(self, key: tuple[int, bool]) -> None:
        while batch := self._pending.pop(key, None):
            try:
                await self._insert(key, [e.row for e in batch])
            except pymysql.err.IntegrityError as exc:
                if len(batch) > 1 and exc.args and exc.args[0] == ER_DUP_ENTRY:
                    # Nothing was written (one statement): find out row by row whose it was.
                    await asyncio.gather(*(self._one(key, e) for e in batch))
                    continue
                _fail(batch, exc)
            except Exception as exc:  # noqa: BLE001 - handed to every waiter
                _fail(batch, exc)
            else:
                for e in batch:
                    if not e.done.done():
                        e.done.set_result(None)

    async def _one(self, key: tuple[int, bool], e: _Pending) -> None:
        try:
            await self._insert(key, [e.row])
        except Exception as exc:  # noqa: BLE001 - handed to the waiter
            _fail([e], exc)
        else:
            if not e.done.done():
                e.done.set_result(None)

    async def _insert(self, key: tuple[int, bool], rows: list[tuple[int, int, str]]) -> None:
        dn_id, upsert = key
        async with self._pools.connection(dn_id) as conn, conn.cursor() as cur:
            await cur.execute(schema.record_statement(len(rows), upsert), sum(rows, ()))

    async def close(self) -> None:
        writers, self._writers = list(self._writers.values()), {}
        await asyncio.gather(*writers, return_exceptions=True)


def _fail(batch: list[_Pending], exc: BaseException) -> None:
    for e in batch:
        if not e.done.done():
            e.done.set_exception(exc)
