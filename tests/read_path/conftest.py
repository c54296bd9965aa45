"""One real pipeline (`cdc start`, 2 DNs) for the snapshot-read tests: bank.accounts sharded in 4
partitions under a steady transfer load (its total never changes, which a read that is not a
snapshot of one moment breaks), and the orders workload's shop tables (every column type the
workloads write) left still. Pages are 16 rows, so a statement is many chunks, each with its own
high watermark, while transfers move money between them."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
import pytest

from cdc.config import Config, DumperUser
from cdc.protocol import auth
from cdc_equipment.cn import ComputeNode
from cdc_equipment.cn.workloads.orders import OrdersWorkload
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from tests.compat.conftest import cdc_start, transfers_until

ACCOUNTS = 300
BALANCE = 1000
PAGE_ROWS = 16
READER = ("reader", "rpw")  # select = true
BANK_ONLY = ("banker", "bpw")  # select = ["bank"]
NO_ROWS = ("norows", "npw")  # no select
MARIADB_DOMAIN = 3


@dataclass(slots=True)
class Snap:
    config: Config
    directory: Path
    traffic_errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start_traffic(self) -> None:
        self._stop = threading.Event()

        def run() -> None:
            try:
                asyncio.run(_transfers(self.config, self._stop))
            except BaseException as exc:
                self.traffic_errors.append(exc)

        self._thread = threading.Thread(target=run, name="snapshot-transfers", daemon=True)
        self._thread.start()

    def stop_traffic(self) -> None:
        """Until the transfers under way are committed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
            self._thread = None

    def connect(self, user: tuple[str, str] = READER, **kwargs) -> pymysql.Connection:
        return pymysql.connect(
            host="127.0.0.1",
            port=self.config.dumper.port,
            user=user[0],
            password=user[1],
            connect_timeout=10,
            read_timeout=120,
            **kwargs,
        )

    def dn(self, index: int) -> pymysql.Connection:
        node = self.config.dn[index]
        return pymysql.connect(
            host=node.host, port=node.port, user=node.user, password=node.password
        )


async def _setup(cfg: Config, *, orders: bool = True) -> None:
    cn = ComputeNode(cfg)
    await cn.start()
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        await TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=4).setup()
        if not orders:
            return
        orders = OrdersWorkload(cn, customers=60, large_rows=300, large_every=3)
        await orders.setup()
        # The byte-for-byte test needs rows in every shop table: a step that fails (the
        # workload counts and swallows CN errors, e.g. under load) may leave `orders` empty.
        for attempt in range(5):
            stats = await run_workload(
                orders.step, threads=1, duration_s=3600, max_transactions=12, seed=attempt
            )
            if orders._orders:
                break
        assert orders._orders, f"the orders workload wrote no order: {stats.errors}"
    finally:
        await cn.close()


async def _transfers(cfg: Config, stop: threading.Event) -> None:
    await transfers_until(cfg, stop, accounts=ACCOUNTS, partitions=4, threads=2, tps=100)


@pytest.fixture(scope="package")
def snap(tmp_path_factory) -> Iterator[Snap]:
    with running_snap(tmp_path_factory.mktemp("snapshot")) as snap:
        yield snap


@contextlib.contextmanager
def running_snap(
    directory: Path, *, mariadb: bool = False, archive: bool = False
) -> Iterator[Snap]:
    """The cluster and pipeline of `snap` (`mariadb`: the mariadb flavour, bank only;
    `archive`: purged files move to `<directory>/archive`)."""
    cluster = throwaway_cluster(directory / "cluster", dns=2, spare_dns=0)
    try:
        cfg = cluster.config()
        d = cfg.dumper
        d.binlog_dir = str(directory / "binlog")
        d.port = free_base_port(0)
        d.snapshot_page_rows = PAGE_ROWS
        if archive:
            d.archive_dir = str(directory / "archive")
        if mariadb:
            d.flavor = "mariadb"
            d.version = "10.11.19-MariaDB-cdc-log"
            d.gtid_domain_id = MARIADB_DOMAIN
        d.users = [
            *d.users,
            DumperUser(READER[0], auth.native_hash(READER[1]), select=True),
            DumperUser(BANK_ONLY[0], auth.native_hash(BANK_ONLY[1]), select=["bank"]),
            DumperUser(NO_ROWS[0], auth.native_hash(NO_ROWS[1])),
        ]
        cfg.cn.ground_truth_log = str(directory / "truth.jsonl")
        with cdc_start(cfg, directory):
            asyncio.run(asyncio.wait_for(_setup(cfg, orders=not mariadb), 180))
            snap = Snap(cfg, directory)
            snap.start_traffic()
            try:
                yield snap
            finally:
                snap.stop_traffic()
    finally:
        cluster.down()


ALLTYPES = (
    "CREATE TABLE IF NOT EXISTS shop.alltypes (id BIGINT NOT NULL PRIMARY KEY, ti TINYINT, "
    "tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED, "
    "i INT, iu INT UNSIGNED, bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, dc DECIMAL(20,6), dd DATE, "
    "dt DATETIME, dt6 DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME, tm6 TIME(6), y YEAR, b BIT(10), "
    "c CHAR(4), vc VARCHAR(32) CHARACTER SET utf8mb4, tx TEXT, bl BLOB, vb VARBINARY(8), "
    "e ENUM('a','b'), st SET('x','y','z'), j JSON)"
)
COLUMNS = (
    "id, ti, tu, si, su, mi, mu, i, iu, bu, f, d, dc, dd, dt, dt6, ts, tm, tm6, y, b, c, vc, tx, "
    "bl, vb, e, st, j"
)
ALLTYPE_ROWS = [
    "(0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, "
    "18446744073709551615, 1.5, 0.1, -12345678901234.123456, '1000-01-01', "
    "'2026-01-01 00:00:00', '2026-11-25 10:20:30.000001', '1970-01-01 00:00:01.500', "
    "'-838:59:59', '25:00:00.5', 1901, 682, 'ab', 'héllo ☃', 'text', 'blob\\0x', 'vb', 'a', "
    "'x,z', '{\"a\": [1, 2]}')",
    "(2, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 0, -3.4e38, 1e-300, 0, '9999-12-31', "
    "'9999-12-31 23:59:59', '2000-02-29 00:00:00.000000', '2038-01-19 03:14:07.999', "
    "'00:00:00', '-00:00:01.000001', 2155, 0, '', '', '', '', '', 'b', '', '[]')",
]
ALLTYPE_ROWS += [
    f"({i}, {i % 100}, {i % 200}, {i * 7}, {i}, {i * 1000}, {i}, {i * 99991}, {i}, {i * 10**12}, "
    f"{i / 7}, {i / 3}, {i}.{i:06d}, '2020-{1 + i % 12:02d}-{1 + i % 28:02d}', "
    f"'2021-03-04 05:06:{i % 60:02d}', '2022-01-01 00:00:00.{i:06d}', NULL, "
    f"'{i % 24:02d}:{i % 60:02d}:00', '{i:02d}:00:01.{i:06d}', {1901 + i}, {i}, 'c{i}', "
    f"'v{i}', 't{i}', 'b{i}', 'x{i}', 'a', 'y', '{{\"i\": {i}}}')"
    for i in range(3, 40)
]


# Strings whose order differs by collation (case, accents, trailing spaces): ORDER BY vc or c
# must give MariaDB's order (utf8mb4_general_ci).
WORDS = [("B", "é"), ("a", "E"), ("É", "b"), ("e", "ä"), ("ß", "s"), ("Z", "z"), ("b ", "B")]
WORDS += [("á", "a"), ("ss", "A")]
ALLTYPE_ROWS += [
    "("
    + ", ".join([str(40 + n), *["NULL"] * 9, f"{n / 3}", *["NULL"] * 10, f"'{c}'", f"'{vc}'"])
    + ", NULL" * 6
    + ")"
    for n, (vc, c) in enumerate(WORDS)
]


async def _create_alltypes(cfg) -> None:
    cn = ComputeNode(cfg)
    await cn.start()
    warnings.simplefilter("ignore", pymysql.Warning)
    try:
        await cn.execute_ddl(ALLTYPES, shard_key="id", partitions=4)
        async with cn.transaction() as tx:
            await tx.execute(
                f"INSERT INTO shop.alltypes ({COLUMNS}) VALUES {', '.join(ALLTYPE_ROWS)}"
            )
    finally:
        await cn.close()


@pytest.fixture(scope="package")
def alltypes(snap):
    """shop.alltypes, once its rows are in the global binlog (a read sees them)."""
    asyncio.run(asyncio.wait_for(_create_alltypes(snap.config), 120))
    deadline = time.monotonic() + 60
    while True:
        conn = snap.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM shop.alltypes")
                if cur.fetchone()[0] == len(ALLTYPE_ROWS):
                    return "alltypes"
        finally:
            conn.close()
        assert time.monotonic() < deadline, "shop.alltypes did not reach the global binlog"
        time.sleep(0.3)


def shop_shards(config: Config, table: str) -> list[tuple[object, str]]:
    """(DN node, physical table) of each shard of `shop.<table>`; a broadcast table
    (`currencies`) counts once, on the first DN."""
    out = []
    for node in config.dn:
        conn = pymysql.connect(
            host=node.host, port=node.port, user=node.user, password=node.password
        )
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES FROM shop_p")
            names = [r[0] for r in cur.fetchall() if r[0].startswith(table + "_")]
        conn.close()
        if table == "currencies":  # broadcast: one copy
            names = names[:1] if node is config.dn[0] else []
        out.extend((node, name) for name in names)
    return out


def wrong_answers(cur, cases) -> list:
    """Each (statement, MySQL error code, what its message says) run on `cur`: those answered,
    or refused otherwise, with what came back (an error keeps the connection)."""
    wrong = []
    for sql, code, says in cases:
        try:
            cur.execute(sql)
            wrong.append((sql, "answered"))
        except pymysql.err.MySQLError as err:
            if err.args[0] != code or says not in err.args[1]:
                wrong.append((sql, err.args))
    return wrong
