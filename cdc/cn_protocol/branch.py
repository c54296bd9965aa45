"""One XA branch of a CN transaction: the owner connection on one DN and its XA state."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import pymysql

from cdc.cn_protocol.context import ProtocolContext
from cdc.cn_protocol.dn_conn import Cursor, DnConnection
from cdc.cn_protocol.xid import Xid, parse_recover_row

log = logging.getLogger(__name__)

ER_XAER_NOTA = 1397  # unknown xid: never prepared, already settled, or still owned by a session

# NEW: XA START not sent yet (it rides with the branch's first statement).
NEW, ACTIVE, ENDED, PREPARED, DONE, DETACHED = (
    "new",
    "active",
    "ended",
    "prepared",
    "done",
    "detached",
)


@dataclass(slots=True)
class Branch:
    """Branch connections accept several statements per packet (CLIENT_MULTI_STATEMENTS): the
    CN sends `XA START` with the first statement, deferred writes (`Transaction.defer`) with
    the next statement or with `XA END` + `XA PREPARE`, all in one round trip. MariaDB stops at
    the first failing statement of a packet, so the state below is exact: it advances as each
    result arrives."""

    xid: Xid
    conn: DnConnection | None
    wrote: bool = False  # a statement changed rows: the branch is a participant
    state: str = NEW
    batched: bool = True  # CnConfig.batch_round_trips
    pending: list[str] = field(default_factory=list)  # deferred writes, not sent yet

    @property
    def dn_id(self) -> int:
        return self.xid.dn_id

    async def run(self, sql: str) -> Cursor:
        """Run one statement (after XA START and deferred writes, if any); the cursor holds its
        result."""
        return await self._send(sql, end=False)

    async def flush(self) -> None:
        """Send the deferred writes (and XA START if needed)."""
        if self.pending:
            await self._send(None, end=False)

    async def end_and_prepare(self) -> None:
        """XA END + XA PREPARE, after the deferred writes."""
        await self._send(None, end=True)

    async def _send(self, sql: str | None, end: bool) -> Cursor:
        x = self.xid.sql
        # (statement, state after its success; None: a deferred write, "": the statement)
        steps = [(f"XA START {x}", ACTIVE)] if self.state == NEW else []
        steps += [(w, None) for w in self.pending]
        self.pending = []
        if sql is not None:
            steps.append((sql, ""))
        if end:
            steps += [(f"XA END {x}", ENDED), (f"XA PREPARE {x}", PREPARED)]
        cur = await self.conn.cursor()
        if self.batched:
            await cur.execute("; ".join(s for s, _ in steps))
        for i, (text, state) in enumerate(steps):
            if not self.batched:
                await cur.execute(text)
            elif i:
                await cur.nextset()  # the next statement's result (raises its error)
            if state:
                self.state = state
            elif state is None and cur.rowcount > 0:
                self.wrote = True
        return cur

    def release(self, ctx: ProtocolContext, discard: bool = False) -> None:
        """Give the owner connection back; `discard` closes it, which detaches a prepared branch
        from its session so that recovery (or anyone) may settle it."""
        if self.conn is not None:
            ctx.pools.release(self.dn_id, self.conn, discard=discard)
            self.conn = None
        if discard and self.state == PREPARED:
            self.state = DETACHED


def errno(exc: BaseException) -> int | None:
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


async def abort(ctx: ProtocolContext, b: Branch) -> None:
    """Roll the branch back by whatever means is left; leave it for recovery if the DN is away."""
    if b.state == DONE:
        return
    if b.state == NEW:  # XA START never ran: nothing to roll back
        b.state = DONE
        b.release(ctx)
        return
    if b.conn is not None:
        try:
            if b.state == ACTIVE:
                try:
                    await b.run(f"XA END {b.xid.sql}")
                except pymysql.err.MySQLError:
                    pass  # already ended, or rollback-only after a deadlock
            await b.run(f"XA ROLLBACK {b.xid.sql}")
            b.state = DONE
            b.release(ctx)
            return
        except pymysql.err.MySQLError as exc:
            if errno(exc) == ER_XAER_NOTA:
                b.state = DONE
                b.release(ctx)
                return
            b.release(ctx, discard=True)
    await settle_detached(ctx, b.xid, "ROLLBACK")
    b.state = DONE


async def settle_detached(ctx: ProtocolContext, xid: Xid, verb: str, tries: int = 5) -> bool:
    """XA COMMIT/ROLLBACK of a branch whose owner session is gone (or going: the DN may not have
    noticed the closed socket yet, so retry while XA RECOVER still lists it)."""
    for attempt in range(tries):
        try:
            await ctx.pools.execute(xid.dn_id, f"XA {verb} {xid.sql}")
            return True
        except pymysql.err.MySQLError as exc:
            if errno(exc) != ER_XAER_NOTA:
                log.warning(
                    "DN %s: XA %s of %s failed (%s); left for `cdc cn recover`",
                    xid.dn_id,
                    verb,
                    xid.gtrid,
                    exc,
                )
                return False
            try:
                rows = await ctx.pools.execute(xid.dn_id, "XA RECOVER")
            except pymysql.err.MySQLError:
                return False
            if xid not in {parse_recover_row(r) for r in rows}:
                return True  # never prepared, or already settled
            await asyncio.sleep(0.05 * (attempt + 1))
    log.warning(
        "DN %s: %s still attached to a session; left for `cdc cn recover`", xid.dn_id, xid.gtrid
    )
    return False
