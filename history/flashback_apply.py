"""A flashback plan applied through a CN: one CN transaction per inverse transaction, newest
first, each statement the one `flashback_sql` writes. A DELETE or UPDATE that matches no row
met a row changed after the plan was made: it changed nothing, and is reported (a late
conflict). The CN is whichever the caller's `CnConnector` opens (the CLI: the reference CN)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.cn_protocol.client import CnConnector

from .flashback import Plan
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
            async with tx:
                for change in txn.changes:
                    for row in change.rows:
                        sql = statement(change.shape, row)
                        result = await tx.execute(sql)
                        if row.kind != "write" and getattr(result, "rowcount", 1) != 1:
                            done.late_conflicts.append(
                                f"{change.shape.db}.{change.shape.name} key "
                                f"{change.shape.key_of(row.before)!r} changed after the plan "
                                f"was made: left as it is (undo of {txn})"
                            )
                        else:
                            done.rows += 1
            done.transactions += 1
            if tx.commit_tso is not None:
                done.commit_tsos.append(tx.commit_tso)
    return done
