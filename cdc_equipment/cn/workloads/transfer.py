"""The bank-transfer workload: random transfers between two accounts (often on different DNs);
the sum of balances never changes."""

from __future__ import annotations

import random
from dataclasses import dataclass

from cdc_equipment.cn.compute_node import ComputeNode


@dataclass(slots=True)
class TransferWorkload:
    cn: ComputeNode
    db: str = "bank"
    accounts: int = 1000
    initial_balance: int = 1000
    partitions: int = 8

    @property
    def table(self) -> str:
        return f"{self.db}.accounts"

    @property
    def expected_total(self) -> int:
        return self.accounts * self.initial_balance

    async def setup(self) -> None:
        """Create and fill the accounts table unless it is already complete (idempotent)."""
        await self.cn.execute_ddl(
            f"CREATE TABLE IF NOT EXISTS {self.table} (id INT UNSIGNED NOT NULL PRIMARY KEY, "
            "balance BIGINT NOT NULL, updated_at DATETIME(6) NULL)",
            shard_key="id",
            partitions=self.partitions,
        )
        count, _ = await self.totals()
        if count >= self.accounts:
            return
        for lo in range(0, self.accounts, 200):
            ids = range(lo, min(lo + 200, self.accounts))
            rows = ", ".join(f"({i}, {self.initial_balance})" for i in ids)
            async with self.cn.transaction() as tx:
                await tx.execute(f"INSERT IGNORE INTO {self.table} (id, balance) VALUES {rows}")

    async def step(self, rng: random.Random) -> None:
        a, b = rng.sample(range(self.accounts), 2)
        amount = rng.randint(1, 100)

        async def body(tx) -> None:
            # Lock in id order: a cross-DN deadlock is invisible to InnoDB (it would wait out
            # innodb_lock_wait_timeout), so never create one.
            for account, delta in sorted([(a, -amount), (b, amount)]):
                await tx.execute(
                    f"UPDATE {self.table} SET balance = balance + %s, updated_at = NOW(6) "
                    "WHERE id = %s",
                    (delta, account),
                )

        await self.cn.run_transaction(body)

    async def totals(self) -> tuple[int, int]:
        """(number of accounts, sum of balances), read through the CN (scattered SELECT)."""
        async with self.cn.transaction() as tx:
            res = await tx.execute(f"SELECT COUNT(*), COALESCE(SUM(balance), 0) FROM {self.table}")
        return sum(int(r[0]) for r in res.rows), sum(int(r[1]) for r in res.rows)

    async def report(self) -> str:
        count, total = await self.totals()
        state = "unchanged" if total == self.expected_total else "CHANGED"
        return f"accounts {count}, total balance {total} ({state}; expected {self.expected_total})"
