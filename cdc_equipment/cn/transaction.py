"""A CN transaction: routes statements, opens an XA branch per touched DN, tags every physical
statement with its TraceId hint, and commits with the commit protocol (the branch and commit
machinery is the protocol's: `cdc.cn_protocol.transaction.PrivateTransaction`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.cn_protocol.errors import TransactionAborted
from cdc.cn_protocol.sql import literal, render
from cdc.cn_protocol.transaction import PrivateTransaction, trace_hint
from cdc_equipment.cn.context import CnContext
from cdc_equipment.cn.partition_gate import PartitionKey
from cdc_equipment.cn.router import ShardKeyMove, route


@dataclass(slots=True)
class Result:
    rows: list[tuple] = field(default_factory=list)
    rowcount: int = 0
    columns: list[str] = field(default_factory=list)


class Transaction(PrivateTransaction):
    """Use as `async with cn.transaction() as tx:`; commits on normal exit, rolls back on error."""

    _ctx: CnContext

    def __init__(self, ctx: CnContext, default_db: str | None = None, kind: str = "txn"):
        super().__init__(ctx, kind)
        self.default_db = default_db
        self._held: set[PartitionKey] = set()

    # -- statements ------------------------------------------------------------------------------
    async def execute(self, sql: str, params=None) -> Result:
        """Route and run one logical statement (pymysql-style `%s` params)."""
        self._check_open()
        try:
            text = render(sql, params)
            plan = route(text, self._ctx.catalogue, self.default_db)
            self._seq += 1
            if isinstance(plan, ShardKeyMove):
                return await self._move(plan, text)
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

    async def _move(self, plan: ShardKeyMove, text: str) -> Result:
        """Shard-key UPDATE across partitions: SELECT old rows, DELETE them, INSERT the new ones."""
        if await self._enter(plan.table, [*plan.old_partitions, plan.new_partition]):
            fresh = route(text, self._ctx.catalogue, self.default_db)  # see execute
            assert isinstance(fresh, ShardKeyMove)
            plan = fresh
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

    async def _enter(self, table, partitions) -> bool:
        # A broadcast table is one gate key (-1): logical DDL freezes it as a whole.
        keys = (
            {(table.db, table.name, -1)}
            if table.is_broadcast
            else {(table.db, table.name, p) for p in partitions}
        )
        return await self._ctx.gate.enter(keys, self._held)

    async def commit(self) -> int | None:
        membership = self._ctx.membership
        if self._state != "closed" and membership is not None and not membership.lease_ok():
            # The others may count this CN dead and change what it wrote to: never commit then.
            await self.rollback()
            raise TransactionAborted(
                f"txn {self.txn_id}: this CN's lease in the GMS lapsed (GMS unreachable or the "
                "process stalled); rolled back, retry"
            )
        return await super().commit()

    async def _leave(self) -> None:
        await super()._leave()
        await self._ctx.gate.leave(self._held)
