"""A CN transaction: routes statements, opens an XA branch per touched DN, tags every physical
statement with its TraceId hint, and commits with the commit protocol."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pymysql

from cdc.cn import commit_protocol
from cdc.cn.branch import NEW, Branch
from cdc.cn.context import CnContext
from cdc.cn.errors import TransactionAborted
from cdc.cn.partition_gate import PartitionKey
from cdc.cn.router import ShardKeyMove, route
from cdc.cn.sql_text import literal, render
from cdc.cn.xid import Xid

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Result:
    rows: list[tuple] = field(default_factory=list)
    rowcount: int = 0
    columns: list[str] = field(default_factory=list)


def trace_hint(seq: int, subseq: int, server_id: int) -> str:
    return f"/*CDC trace={seq}.{subseq} cn={server_id} */"


class Transaction:
    """Use as `async with cn.transaction() as tx:`; commits on normal exit, rolls back on error."""

    def __init__(self, ctx: CnContext, default_db: str | None = None, kind: str = "txn"):
        self._ctx = ctx
        self.txn_id = ctx.next_txn_id()
        self.default_db = default_db
        self.kind = kind
        self.commit_tso: int | None = None
        self._branches: dict[int, Branch] = {}  # insertion order = first-touch order
        self._seq = 0
        self._held: set[PartitionKey] = set()
        self._state = "open"  # open | failed | closed
        self._admitted = False  # holds a slot of `pools.admission` (from its first branch on)
        self._queued: Branch | None = None  # the branch holding deferred writes, if any

    # -- statements ------------------------------------------------------------------------------
    async def execute(self, sql: str, params=None) -> Result:
        """Route and run one logical statement (pymysql-style `%s` params)."""
        self._check_open()
        try:
            text = render(sql, params)
            plan = route(text, self._ctx.catalogue, self.default_db)
            self._seq += 1
            if isinstance(plan, ShardKeyMove):
                return await self._move(plan)
            if await self._enter(plan.table, [s.partition for s in plan.statements]):
                # Route again: waiting at the gate may have outlasted a partition move, and the
                # first plan would then write to the old copy (lost once it is dropped).
                plan = route(text, self._ctx.catalogue, self.default_db)
            result = Result()
            for sub, st in enumerate(plan.statements):
                cur = await self._run(st.dn_id, sub, st.sql, write=plan.is_write)
                result.rowcount += max(cur.rowcount, 0)
                if plan.is_select:
                    result.rows.extend(await cur.fetchall())
                    result.columns = [d[0] for d in cur.description or ()]
            return result
        except BaseException:
            self._state = "failed"
            raise

    async def defer(self, sql: str, params=None) -> None:
        """Like `execute` for a write whose result the caller does not need: the physical
        statements are queued and sent with the next statement on their DN, or with XA END +
        XA PREPARE at commit (a single-DN transaction then writes and prepares in one round
        trip). Statement order is kept: a statement for another DN sends the queued ones
        first, so rows are locked in the caller's order. A failure shows at the next statement
        or at commit (`TransactionAborted`, rolled back). SELECTs, shard-key moves and
        `cn.batch_round_trips = false` run at once."""
        self._check_open()
        try:
            text = render(sql, params)
            plan = route(text, self._ctx.catalogue, self.default_db)
            if (
                isinstance(plan, ShardKeyMove)
                or not plan.is_write
                or not self._ctx.config.cn.batch_round_trips
            ):
                await self.execute(sql, params)
                return
            self._seq += 1
            if await self._enter(plan.table, [s.partition for s in plan.statements]):
                plan = route(text, self._ctx.catalogue, self.default_db)  # see execute
            for sub, st in enumerate(plan.statements):
                if self._queued is not None and self._queued.dn_id != st.dn_id:
                    await self._flush()
                branch = await self._branch(st.dn_id)
                branch.pending.append(f"{trace_hint(self._seq, sub, self._ctx.server_id)} {st.sql}")
                self._queued = branch
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

    async def _move(self, plan: ShardKeyMove) -> Result:
        """Shard-key UPDATE across partitions: SELECT old rows, DELETE them, INSERT the new ones."""
        await self._enter(plan.table, [*plan.old_partitions, plan.new_partition])
        result, sub = Result(), 0
        for p in plan.old_partitions:
            dn = plan.table.placement[p]
            cur = await self._run(dn, sub, plan.select_sql(p), write=False)
            rows = await cur.fetchall()
            columns = [d[0] for d in cur.description]
            sub += 1
            if not rows:
                continue
            await self._run(dn, sub, plan.delete_sql(p), write=True)
            sub += 1
            new_rows = [
                [
                    plan.assignments.get(c.lower()) or literal(v)
                    for c, v in zip(columns, row, strict=True)
                ]
                for row in rows
            ]
            target = plan.table.placement[plan.new_partition]
            await self._run(target, sub, plan.insert_sql(columns, new_rows), write=True)
            sub += 1
            result.rowcount += len(rows)
        return result

    async def _branch(self, dn_id: int) -> Branch:
        branch = self._branches.get(dn_id)
        if branch is None:
            if not self._admitted:
                await self._ctx.pools.admission.acquire()
                self._admitted = True
            conn = await self._ctx.pools.acquire(dn_id)
            # XA START is sent with the branch's first statement (Branch.run).
            branch = Branch(
                Xid(self.txn_id, dn_id), conn, batched=self._ctx.config.cn.batch_round_trips
            )
            self._branches[dn_id] = branch
        return branch

    async def _enter(self, table, partitions) -> bool:
        # A broadcast table is one gate key (-1): logical DDL freezes it as a whole.
        keys = (
            {(table.db, table.name, -1)}
            if table.is_broadcast
            else {(table.db, table.name, p) for p in partitions}
        )
        return await self._ctx.gate.enter(keys, self._held)

    def _check_open(self) -> None:
        if self._state == "failed":
            raise TransactionAborted(
                f"txn {self.txn_id}: an earlier statement failed; roll back and retry"
            )
        if self._state == "closed":
            raise TransactionAborted(f"txn {self.txn_id} is already committed or rolled back")

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
            self._leave_admission()
            await self._ctx.gate.leave(self._held)

    def _leave_admission(self) -> None:
        if self._admitted:
            self._admitted = False
            self._ctx.pools.admission.release()

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
            self._leave_admission()
            await self._ctx.gate.leave(self._held)

    async def __aenter__(self) -> Transaction:
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if self._state == "closed":
            return  # committed or rolled back explicitly inside the block
        if exc_type is None:
            await self.commit()
        else:
            await self.rollback()
