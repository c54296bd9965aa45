"""The orders workload: customers, orders and a broadcast currency table with many column types
(unsigned ints, DECIMAL, utf8mb4 text with emoji and CJK, DATETIME(6), TIMESTAMP, DATE, BLOB,
ENUM, NULLs); multi-statement transactions across DNs, shard-key moves, large transactions."""

from __future__ import annotations

import datetime
import decimal
import itertools
import random
from dataclasses import dataclass, field

from cdc_equipment.cn.compute_node import ComputeNode

TITLES = [
    "plain",
    "emoji 😀🚀",
    "中文订单",
    "日本語の注文",
    "한국어",
    "mixé ünïcödé",
    'it\'s "quoted"',
]
STATUSES = ["new", "paid", "shipped", "cancelled"]

TABLES = {
    "customers": (
        "CREATE TABLE IF NOT EXISTS {db}.customers (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, "
        "name VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL, tier ENUM('basic','silver','gold') "
        "NOT NULL DEFAULT 'basic', balance DECIMAL(14,2) NOT NULL DEFAULT 0, "
        "orders INT UNSIGNED NOT NULL DEFAULT 0, birthday DATE NULL, "
        "created_at DATETIME(6) NOT NULL, note TEXT NULL)",
        "id",
    ),
    "orders": (
        "CREATE TABLE IF NOT EXISTS {db}.orders (customer_id BIGINT UNSIGNED NOT NULL, "
        "id BIGINT UNSIGNED NOT NULL, amount DECIMAL(12,2) NOT NULL, qty SMALLINT UNSIGNED NOT "
        "NULL, status ENUM('new','paid','shipped','cancelled') NOT NULL, title VARCHAR(200) "
        "CHARACTER SET utf8mb4 NULL, created_at DATETIME(6) NOT NULL, updated_at TIMESTAMP NULL "
        "DEFAULT NULL, ship_date DATE NULL, payload BLOB NULL, PRIMARY KEY (customer_id, id))",
        "customer_id",
    ),
    "order_events": (
        "CREATE TABLE IF NOT EXISTS {db}.order_events (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, "
        "batch BIGINT UNSIGNED NOT NULL, kind VARCHAR(16) NOT NULL, at DATETIME(6) NOT NULL)",
        "id",
    ),
}


@dataclass(slots=True)
class OrdersWorkload:
    cn: ComputeNode
    db: str = "shop"
    customers: int = 500
    large_rows: int = 100_000
    large_every: int = 2000  # one large transaction per this many steps, on average
    _ids: itertools.count = field(
        default_factory=lambda: itertools.count(random.getrandbits(40) << 16)
    )
    _orders: list[tuple[int, int]] = field(default_factory=list)
    large_done: int = 0

    async def setup(self) -> None:
        for ddl, key in TABLES.values():
            await self.cn.execute_ddl(ddl.format(db=self.db), shard_key=key, partitions=8)
        await self.cn.execute_ddl(
            f"CREATE TABLE IF NOT EXISTS {self.db}.currencies (code CHAR(3) NOT NULL PRIMARY KEY, "
            "rate DECIMAL(18,8) NOT NULL, updated_at DATETIME(6) NULL)",
            broadcast=True,
        )
        async with self.cn.transaction() as tx:
            await tx.execute(
                f"INSERT IGNORE INTO {self.db}.currencies (code, rate) VALUES "
                "('EUR', 1), ('USD', 1.08), ('CNY', 7.8), ('JPY', 160.5)"
            )
        rng = random.Random(1)
        for lo in range(0, self.customers, 250):
            async with self.cn.transaction() as tx:
                rows = [
                    (i, rng.choice(TITLES)[:60], rng.choice(["basic", "silver", "gold"]),
                     None if i % 7 == 0 else datetime.date(1970 + i % 50, 1 + i % 12, 1 + i % 28),
                     datetime.datetime.now(), None if i % 3 else "note ✓")
                    for i in range(lo, min(lo + 250, self.customers))
                ]  # fmt: skip
                await tx.execute(
                    f"INSERT IGNORE INTO {self.db}.customers (id, name, tier, birthday, "
                    "created_at, note) VALUES "
                    + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows)),
                    [v for r in rows for v in r],
                )

    async def step(self, rng: random.Random) -> None:
        if self.large_rows and rng.randrange(self.large_every) == 0:
            await self.cn.run_transaction(lambda tx: self._large(tx, rng))
            return
        r = rng.random()
        if r < 0.45 or not self._orders:
            await self.cn.run_transaction(lambda tx: self._new_order(tx, rng))
        elif r < 0.70:
            await self.cn.run_transaction(lambda tx: self._pay(tx, rng))
        elif r < 0.85:
            await self.cn.run_transaction(lambda tx: self._move(tx, rng))
        elif r < 0.95:
            await self.cn.run_transaction(lambda tx: self._cancel(tx, rng))
        else:
            await self.cn.run_transaction(lambda tx: self._rate(tx, rng))

    async def _new_order(self, tx, rng) -> None:
        customer, order = rng.randrange(self.customers), next(self._ids)
        amount = decimal.Decimal(rng.randrange(100, 100_000)) / 100
        await tx.execute(
            f"INSERT INTO {self.db}.orders (customer_id, id, amount, qty, status, title, "
            "created_at, ship_date, payload) VALUES (%s, %s, %s, %s, 'new', %s, %s, %s, %s)",
            (
                customer, order, amount, rng.randrange(1, 65535), rng.choice(TITLES + [None]),
                datetime.datetime.now(), None if rng.random() < 0.5 else datetime.date.today(),
                None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 300)),
            ),
        )  # fmt: skip
        await tx.execute(
            f"UPDATE {self.db}.customers SET balance = balance - %s, orders = orders + 1 "
            "WHERE id = %s",
            (amount, customer),
        )
        self._orders.append((customer, order))

    async def _pay(self, tx, rng) -> None:
        customer, order = rng.choice(self._orders)
        await tx.execute(
            f"UPDATE {self.db}.orders SET status = %s, updated_at = NOW() WHERE customer_id = %s "
            "AND id = %s",
            (rng.choice(STATUSES[1:3]), customer, order),
        )

    async def _move(self, tx, rng) -> None:
        """Re-assign an order to another customer: a shard-key UPDATE (DELETE + INSERT)."""
        customer, order = rng.choice(self._orders)
        target = rng.randrange(self.customers)
        await tx.execute(
            f"UPDATE {self.db}.orders SET customer_id = %s WHERE customer_id = %s AND id = %s",
            (target, customer, order),
        )
        await tx.execute(
            f"UPDATE {self.db}.customers SET orders = orders + 1 WHERE id = %s", (target,)
        )
        # Other tasks ran while we awaited: find the entry again (it may even be cancelled).
        try:
            self._orders[self._orders.index((customer, order))] = (target, order)
        except ValueError:
            pass

    async def _cancel(self, tx, rng) -> None:
        customer, order = self._orders.pop(rng.randrange(len(self._orders)))
        await tx.execute(
            f"DELETE FROM {self.db}.orders WHERE customer_id = %s AND id = %s", (customer, order)
        )

    async def _rate(self, tx, rng) -> None:
        await tx.execute(
            f"UPDATE {self.db}.currencies SET rate = %s, updated_at = NOW(6) WHERE code = %s",
            (decimal.Decimal(rng.randrange(1, 10**9)) / 10**6, rng.choice(["USD", "CNY", "JPY"])),
        )

    async def _large(self, tx, rng) -> None:
        """One transaction of `large_rows` rows over every DN, in multi-row INSERTs."""
        batch = next(self._ids)
        now = datetime.datetime.now()
        for lo in range(0, self.large_rows, 1000):
            n = min(1000, self.large_rows - lo)
            ids = [next(self._ids) for _ in range(n)]
            await tx.execute(
                f"INSERT INTO {self.db}.order_events (id, batch, kind, at) VALUES "
                + ", ".join(["(%s, %s, 'bulk', %s)"] * n),
                [v for i in ids for v in (i, batch, now)],
            )
        self.large_done += 1

    async def report(self) -> str:
        async def counts(tx):  # two tables: may abort if a move freezes the first (retried)
            return (
                await tx.execute(f"SELECT COUNT(*) FROM {self.db}.orders"),
                await tx.execute(f"SELECT COUNT(*) FROM {self.db}.order_events"),
            )

        (res, ev), _ = await self.cn.run_transaction(counts)
        return (
            f"orders {sum(r[0] for r in res.rows)}, bulk events {sum(r[0] for r in ev.rows)}, "
            f"large transactions {self.large_done} ({self.large_rows} rows each)"
        )
