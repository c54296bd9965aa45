"""A transaction of the commit protocol on the private tables: an XA branch per storage DN it
touches, every statement tagged with its TraceId hint, committed with `commit_protocol`.
Heartbeats and markers are such transactions; the reference CN's `Transaction` (cdc_equipment/cn/) adds
routing of user statements to it."""

from __future__ import annotations

import logging

import pymysql

from cdc.cn_protocol import commit_protocol
from cdc.cn_protocol.branch import NEW, Branch
from cdc.cn_protocol.context import ProtocolContext
from cdc.cn_protocol.errors import TransactionAborted
from cdc.cn_protocol.sql import render
from cdc.cn_protocol.xid import Xid

log = logging.getLogger(__name__)


def trace_hint(seq: int, subseq: int, server_id: int) -> str:
    """The TraceId hint every statement of a CN transaction starts with: the MergeSource reads
    it from the ANNOTATE_ROWS event to order the statements of a transaction."""
    return f"/*CDC trace={seq}.{subseq} cn={server_id} */"


class PrivateTransaction:
    """Use as `async with PrivateTransaction(ctx, kind) as tx:`; commits on normal exit, rolls
    back on error."""

    def __init__(self, ctx: ProtocolContext, kind: str = "txn"):
        self._ctx = ctx
        self.txn_id = ctx.next_txn_id()
        self.kind = kind
        self.commit_tso: int | None = None
        self._branches: dict[int, Branch] = {}  # insertion order = first-touch order
        self._seq = 0
        self._state = "open"  # open | failed | closed
        self._admitted = False  # holds a slot of `pools.admission` (from its first branch on)
        self._queued: Branch | None = None  # the branch holding deferred writes, if any

    async def execute_private(self, sql: str, params=None) -> int:
        """Run a statement on a private `__cdc__` table on every storage DN, in DN order (a fixed
        order, so two CNs writing the same broadcast row cannot deadlock across DNs)."""
        self._check_open()
        try:
            text = render(sql, params)
            self._seq += 1
            n = 0
            for sub, dn in enumerate(self._ctx.catalogue.dns):
                n += (await self._run(dn, sub, text, write=True)).rowcount
            return n
        except BaseException:
            self._state = "failed"
            raise

    async def _flush(self) -> None:
        branch, self._queued = self._queued, None
        await self._guarded(branch, branch.flush())

    async def _guarded(self, branch: Branch, op):
        try:
            return await op
        except BaseException:
            if branch.state == NEW:  # XA START failed: the connection's state is unknown
                del self._branches[branch.dn_id]
                branch.release(self._ctx, discard=True)
            raise

    async def _run(self, dn_id: int, subseq: int, sql: str, write: bool):
        if self._queued is not None and self._queued.dn_id != dn_id:
            await self._flush()  # deferred writes on another DN go first (statement order)
        self._queued = None  # this DN's deferred writes go in the same packet as `sql`
        branch = await self._branch(dn_id)
        hint = trace_hint(self._seq, subseq, self._ctx.server_id)
        cur = await self._guarded(branch, branch.run(f"{hint} {sql}"))
        if write and cur.rowcount > 0:
            branch.wrote = True  # affected (changed) rows: exactly when row events are logged
        return cur

    async def _branch(self, dn_id: int) -> Branch:
        branch = self._branches.get(dn_id)
        if branch is None:
            if not self._admitted:
                await self._ctx.pools.admission.acquire()
                self._admitted = True
            conn = await self._ctx.pools.acquire(dn_id)
            # XA START is sent with the branch's first statement (Branch.run).
            # The xid names its owner session: recovery can end it if it never lets go.
            xid = Xid(self.txn_id, dn_id, conn.connection_id)
            branch = Branch(xid, conn, batched=self._ctx.config.cn.batch_round_trips)
            self._branches[dn_id] = branch
        return branch

    def _check_open(self) -> None:
        if self._state == "failed":
            raise TransactionAborted(
                f"txn {self.txn_id}: an earlier statement failed; roll back and retry"
            )
        if self._state == "closed":
            raise TransactionAborted(f"txn {self.txn_id} is already committed or rolled back")

    async def _leave(self) -> None:
        """Called once the transaction ended (committed or rolled back)."""
        if self._admitted:
            self._admitted = False
            self._ctx.pools.admission.release()

    # -- end ---------------------------------------------------------------------------------------
    async def commit(self) -> int | None:
        """Commit on every DN; returns the commit TSO (None if nothing was written)."""
        if self._state == "failed":
            await self.rollback()
            raise TransactionAborted(f"txn {self.txn_id}: a statement failed; rolled back")
        self._check_open()
        self._state = "closed"
        self._queued = None  # deferred writes go with XA END + XA PREPARE
        try:
            self.commit_tso = await commit_protocol.commit(
                self._ctx, self.txn_id, list(self._branches.values()), self.kind
            )
            return self.commit_tso
        finally:
            await self._leave()

    async def rollback(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        try:
            await commit_protocol.abort_all(self._ctx, list(self._branches.values()))
        except pymysql.err.MySQLError as exc:
            log.warning(
                "txn %s: rollback incomplete (%s); recovery will finish it", self.txn_id, exc
            )
        finally:
            await self._leave()

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if self._state == "closed":
            return  # committed or rolled back explicitly inside the block
        if exc_type is None:
            await self.commit()
        else:
            await self.rollback()
