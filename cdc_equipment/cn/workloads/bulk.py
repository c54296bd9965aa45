"""The bulk workload: multi-row INSERTs of ledger lines, each transaction spanning every DN
(its rows are spread over the partitions). Beside the transfers' single-row updates it gives a
benchmark's DN binlogs the other kind of XA transaction: few, large row events."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from cdc_equipment.cn.compute_node import ComputeNode


@dataclass(slots=True)
class BulkInsertWorkload:
    cn: ComputeNode
    db: str = "bank"
    rows: int = 100  # rows per transaction (one INSERT statement)
    partitions: int = 8
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def table(self) -> str:
        return f"{self.db}.ledger"

    async def setup(self) -> None:
        await self.cn.execute_ddl(
            f"CREATE TABLE IF NOT EXISTS {self.table} (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, "
            "account INT UNSIGNED NOT NULL, amount BIGINT NOT NULL, note VARCHAR(64) NOT NULL)",
            shard_key="id",
            partitions=self.partitions,
        )
        async with self.cn.transaction() as tx:  # continue after the ids of an earlier run
            res = await tx.execute(f"SELECT COALESCE(MAX(id), 0) FROM {self.table}")
        self._ids = itertools.count(max(int(r[0]) for r in res.rows) + 1)  # max of the shards

    async def step(self, rng: random.Random) -> None:
        values = [
            (next(self._ids), rng.randrange(1000), rng.randint(-500, 500), "bulk line")
            for _ in range(self.rows)
        ]

        async def body(tx) -> None:
            await tx.execute(
                f"INSERT INTO {self.table} (id, account, amount, note) VALUES "
                + ", ".join(["(%s, %s, %s, %s)"] * len(values)),
                [v for row in values for v in row],
            )

        await self.cn.run_transaction(body)
