"""The ddl-mix workload: DML on a logical table while one task keeps changing its schema
(ADD/DROP/MODIFY COLUMN, ADD/DROP INDEX) and churns a scratch table (CREATE/TRUNCATE/DROP).

`report()` stops the DDL task between statements, never inside one: a DDL cut mid-job would
stay `running` in the job log with its owner gone, and whichever CN starts next (even
`cdc check`'s) would finish it, writing its DDL record after the workload, and perhaps the
pipeline that was to read it, has stopped."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from dataclasses import dataclass, field

from cdc_equipment.cn.compute_node import ComputeNode

DDL_CYCLE = (
    "ALTER TABLE {db}.items ADD COLUMN extra INT NULL",
    "ALTER TABLE {db}.items ADD INDEX by_qty (qty)",
    "ALTER TABLE {db}.items MODIFY COLUMN label VARCHAR(96) CHARACTER SET utf8mb4 NULL",
    "CREATE TABLE IF NOT EXISTS {db}.scratch (id INT PRIMARY KEY, v VARCHAR(10))",
    "TRUNCATE TABLE {db}.scratch",
    "ALTER TABLE {db}.items DROP INDEX by_qty",
    "ALTER TABLE {db}.items DROP COLUMN extra",
    "ALTER TABLE {db}.items MODIFY COLUMN label VARCHAR(64) CHARACTER SET utf8mb4 NULL",
    "DROP TABLE IF EXISTS {db}.scratch",
)


@dataclass(slots=True)
class DdlMixWorkload:
    cn: ComputeNode
    db: str = "mix"
    keys: int = 500
    ddl_every_s: float = 0.5
    ddl_done: int = 0
    _ddl_task: asyncio.Task | None = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _cycle: itertools.cycle = field(default_factory=lambda: itertools.cycle(DDL_CYCLE))

    async def setup(self) -> None:
        # Start from the first step of the cycle, whatever an earlier run left behind.
        await self.cn.execute_ddl(f"DROP TABLE IF EXISTS {self.db}.items")
        await self.cn.execute_ddl(f"DROP TABLE IF EXISTS {self.db}.scratch")
        await self.cn.execute_ddl(
            f"CREATE TABLE {self.db}.items (id INT UNSIGNED PRIMARY KEY, qty INT NOT NULL, "
            "label VARCHAR(64) CHARACTER SET utf8mb4 NULL)",
            shard_key="id",
            partitions=6,
        )

    async def _ddl_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ddl_every_s):
                    await self._stopping.wait()
            if self._stopping.is_set():
                return
            sql = next(self._cycle).format(db=self.db)
            await self.cn.execute_ddl(sql, shard_key="id", partitions=3)
            self.ddl_done += 1

    async def step(self, rng: random.Random) -> None:
        if self._ddl_task is None:
            self._ddl_task = asyncio.create_task(self._ddl_loop())
        k = rng.randrange(self.keys)

        async def body(tx) -> None:
            await tx.execute(
                f"INSERT INTO {self.db}.items (id, qty, label) VALUES (%s, 1, %s) "
                "ON DUPLICATE KEY UPDATE qty = qty + 1",
                (k, f"item {k} ✓"),
            )
            if rng.random() < 0.2:
                await tx.execute(
                    f"DELETE FROM {self.db}.items WHERE id = %s", (rng.randrange(self.keys),)
                )

        await self.cn.run_transaction(body)

    async def report(self) -> str:
        if self._ddl_task is not None:
            self._stopping.set()  # the DDL under way, if any, ends first (its job done)
            await asyncio.gather(self._ddl_task, return_exceptions=True)
        return f"DDL statements run: {self.ddl_done}"
