"""A flashback plan applied through a CN: one CN transaction per inverse transaction, newest
first, each statement the one `flashback_sql` writes. A DELETE or UPDATE that matches no row
met a row changed after the plan was made: it changed nothing, and is reported (a late
conflict). The CN is whichever the caller's `CnConnector` opens (the CLI: the reference CN)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.cn_protocol.client import CnConnector

from .flashback import FlashbackError, Plan, Txn
from .flashback_sql import statement


@dataclass(slots=True)
class Applied:
    transactions: int = 0
    rows: int = 0
    late_conflicts: list[str] = field(default_factory=list)
    commit_tsos: list[int] = field(default_factory=list)


async def apply(plan: Plan, connector: CnConnector) -> Applied:
    done = Applied()
    async with connector() as cn:
        for txn in plan.undo:
            tx = cn.transaction()
            try:
                async with tx:
                    await _undo(tx, txn, done)
            except Exception as exc:
                raise FlashbackError(
                    f"the undo of the transaction at {txn} failed ({exc}); the "
                    f"{done.transactions} newer ones were undone and committed. Fix the cause "
                    "and run the same flashback again: the keys already restored are then "
                    "conflicts (changed after the range), reported and left as they are"
                ) from exc
            done.transactions += 1
            if tx.commit_tso is not None:
                done.commit_tsos.append(tx.commit_tso)
    return done


async def _undo(tx, txn: Txn, done: Applied) -> None:
    for change in txn.changes:
        for row in change.rows:
            result = await tx.execute(statement(change.shape, row))
            if row.kind != "write" and getattr(result, "rowcount", 1) != 1:
                done.late_conflicts.append(
                    f"{change.shape.db}.{change.shape.name} key "
                    f"{change.shape.key_of(row.before)!r} changed after the plan was made: "
                    f"left as it is (undo of {txn})"
                )
            else:
                done.rows += 1
