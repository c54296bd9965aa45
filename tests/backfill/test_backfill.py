"""Backfill on a cluster of its own (a pipeline needs a binlog history that starts clean): while
the orders workload writes through the CN, `backfill.run` takes a snapshot with Spark (local[2]).

1. At a past TSO T: a MariaDB replica of the dumper stopped exactly at T's position (START SLAVE
   UNTIL) holds, row for row, the snapshot.
2. At `latest`, loaded into an empty MariaDB that then replicates from the printed position:
   after more traffic, `cdc check` finds every logical table equal.
3. Clear errors: unknown table, a DN that is down, a TSO before the retained binlog or in the
   future.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from functools import partial

import pymysql
import pytest

from backfill import BackfillError, Options, run
from backfill.columns import ColumnSpec, arrow_schema, key_value
from backfill.dataset import Manifest, read_part, table_dir
from backfill.global_binlog import Dumper
from backfill.load import change_master, load
from backfill.spark_session import spark_session
from cdc_equipment.cn import ComputeNode, connect, init
from cdc_equipment.cn.workloads.orders import OrdersWorkload
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster, throwaway_server
from dumper.service import serve

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    directory = tmp_path_factory.mktemp("backfill")
    cluster = throwaway_cluster(directory / "cluster", dns=3)
    cfg = cluster.config()
    cfg.dumper.binlog_dir = str(directory / "binlog")
    cfg.pipeline.checkpoint_interval_ms = 200
    cfg.dumper.port = free_base_port(0)
    replicas = [throwaway_server(directory, server_id=600 + i, name=f"r{i}") for i in (1, 2)]
    try:
        yield cfg, directory, replicas
    finally:
        for r in replicas:
            r.stop()
        cluster.down()


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]")
    try:
        yield session
    finally:
        session.stop()


def cn_of(cfg):
    """The CN the backfill writes its watermarks through: the reference CN."""
    return partial(connect, cfg)


def options(cfg, out, **kw) -> Options:
    dumper = Dumper("127.0.0.1", cfg.dumper.port, DEFAULT_USER, DEFAULT_PASSWORD)
    return Options(out=out, dumper=dumper, chunk_rows=300, timeout=60, **kw)


class Pipeline:
    """The pipeline (with its CN heartbeat task) running in this event loop for a `with`."""

    def __init__(self, cfg, directory):
        self.cfg, self.directory = cfg, directory

    async def __aenter__(self):
        status = self.directory / "pipeline" / "status.json"
        status.unlink(missing_ok=True)  # an earlier test's: serve() has not run yet
        self.task = asyncio.create_task(
            serve(self.cfg, self.directory / "pipeline", heartbeat=True)
        )
        # Serving once the status file is there: the server is a process of its own and
        # listens a moment after serve() starts (a backfill refused by it failed this test).
        async with asyncio.timeout(60):
            while not status.exists():
                assert not self.task.done(), self.task.exception()
                await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc):
        assert not self.task.done(), self.task.exception()
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):  # bounded: a hang names this stage
            await asyncio.wait_for(self.task, 30)


def replicate(replica, port: int, file: str, pos: int, until: bool) -> None:
    """Point `replica` at the dumper from file:pos; with `until`, from the start up to it."""
    with replica.connect() as conn, conn.cursor() as cur:
        start_file, start_pos = ("binlog.000001", 4) if until else (file, pos)
        cur.execute(
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, "
            f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}', "
            f"MASTER_LOG_FILE='{start_file}', MASTER_LOG_POS={start_pos}, MASTER_USE_GTID=no, "
            "MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1"
        )
        if until:
            cur.execute(f"START SLAVE UNTIL MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}")
        else:
            cur.execute("START SLAVE")


def wait_stopped_at(replica, file: str, pos: int, timeout: float = 90) -> None:
    """The SQL thread stopped at T: after the XID of T's last transaction, which is at most the
    CTS mark (an ignorable Rows_query event, not a group of its own) before `pos`."""
    deadline = time.monotonic() + timeout
    with replica.connect() as conn, conn.cursor() as cur:
        while True:
            cur.execute("SHOW SLAVE STATUS")
            row = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
            assert row["Last_SQL_Error"] == "", row
            if row["Slave_SQL_Running"] == "No":
                assert row["Relay_Master_Log_File"] == file, row
                assert 0 <= pos - row["Exec_Master_Log_Pos"] < 100, row
                return
            assert time.monotonic() < deadline, f"replica did not stop at {file}:{pos}: {row}"
            time.sleep(0.2)


def snapshot_rows(out, manifest: Manifest, t) -> set[tuple]:
    columns = [ColumnSpec(**c) for c in t.columns]
    schema = arrow_schema(columns, t.table)
    rows = set()
    for part in t.parts:
        table = read_part(table_dir(out, t.db, t.table) / part, schema, manifest.format)
        rows |= {tuple(key_value(v) for v in r.values()) for r in table.to_pylist()}
    return rows


def server_rows(replica, t) -> set[tuple]:
    conn = pymysql.connect(
        host=replica.host,
        port=replica.port,
        user="root",
        charset="utf8mb4",
        init_command="SET time_zone = '+00:00'",
    )
    try:
        with conn.cursor() as cur:
            cols = ", ".join(f"`{c['name']}`" for c in t.columns)
            cur.execute(f"SELECT {cols} FROM `{t.db}`.`{t.table}`")
            return set(cur.fetchall())
    finally:
        conn.close()


async def test_snapshot_at_a_past_tso_equals_a_replica_stopped_there(env, spark):
    cfg, directory, (r1, _) = env
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    orders = OrdersWorkload(cn, customers=200, large_rows=400, large_every=150)
    out = directory / "snap1"
    try:
        async with Pipeline(cfg, directory):
            await orders.setup()
            traffic = asyncio.create_task(run_workload(orders.step, threads=3, duration_s=12))
            await asyncio.sleep(3)
            tso = await cn.tso.next()  # T: in the middle of the traffic, before the reads
            await asyncio.sleep(1)
            opts = options(
                cfg, out, tso=tso, tables=["shop.orders", "shop.customers", "shop.currencies"]
            )
            manifest = await asyncio.to_thread(run, cfg, opts, cn_of(cfg), spark=spark)
            stats = await asyncio.wait_for(traffic, 60)
    finally:
        await cn.close()
    assert stats.committed > 50 and manifest.tso == tso
    assert manifest.low_watermark_tso > tso
    async with Pipeline(cfg, directory):
        replicate(r1, cfg.dumper.port, manifest.binlog_file, manifest.binlog_position, until=True)
        await asyncio.to_thread(wait_stopped_at, r1, manifest.binlog_file, manifest.binlog_position)
    assert {f"{t.db}.{t.table}" for t in manifest.tables} == set(opts.tables)
    for t in manifest.tables:
        expected = server_rows(r1, t)
        got = snapshot_rows(out, manifest, t)
        assert len(got) == t.rows, f"{t.db}.{t.table}: duplicate rows in the snapshot"
        assert got == expected, (
            f"{t.db}.{t.table}: {len(got - expected)} rows only in the snapshot, "
            f"{len(expected - got)} only on the replica at T"
        )
    assert sum(t.rows for t in manifest.tables) > 200


async def test_loaded_snapshot_continues_from_the_printed_position(env, spark):
    from cdc_equipment.checks.downstream import run_check

    cfg, directory, (_, r2) = env
    cn = ComputeNode(cfg)
    await cn.start()
    orders = OrdersWorkload(cn, customers=200, large_rows=400, large_every=150)
    out = directory / "snap2"
    try:
        async with Pipeline(cfg, directory):
            traffic = asyncio.create_task(run_workload(orders.step, threads=3, duration_s=8))
            await asyncio.sleep(1)
            manifest = await asyncio.to_thread(
                run, cfg, options(cfg, out, fmt="csv"), cn_of(cfg), spark=spark
            )
            await asyncio.wait_for(traffic, 60)
            loaded = await asyncio.to_thread(load, out, f"mysql://root@{r2.host}:{r2.port}")
            assert loaded == {f"{t.db}.{t.table}": t.rows for t in manifest.tables}
            statement = change_master(manifest, DEFAULT_USER, DEFAULT_PASSWORD)
            assert f"MASTER_LOG_POS={manifest.binlog_position}" in statement
            with r2.connect() as conn, conn.cursor() as cur:
                cur.execute(statement)
                cur.execute("START SLAVE")
            more = await run_workload(orders.step, threads=3, duration_s=3)
            report = await asyncio.to_thread(run_check, cfg, r2.host, r2.port, "root", "", 60)
    finally:
        await cn.close()
    assert more.committed > 0
    assert report.equal, report.render()
    assert {("shop", "orders"), ("cdc_backfill", "watermarks")} <= {
        (t.db, t.table) for t in report.tables
    }


async def test_clear_errors_before_any_work(env, spark, tmp_path):
    cfg, directory, _ = env
    async with Pipeline(cfg, directory):
        with pytest.raises(BackfillError, match=r"unknown logical table shop\.nope"):
            await asyncio.to_thread(
                run, cfg, options(cfg, tmp_path / "a", tables=["shop.nope"]), cn_of(cfg)
            )
        down = dataclasses.replace(cfg, dn=list(cfg.dn))
        down.dn[1] = dataclasses.replace(cfg.dn[1], port=free_base_port(0))
        with pytest.raises(BackfillError, match=r"dn2 \(127\.0\.0\.1:\d+\) is down"):
            await asyncio.to_thread(run, down, options(cfg, tmp_path / "b"), cn_of(down))
        with pytest.raises(BackfillError, match="older than the retained global binlog"):
            await asyncio.to_thread(run, cfg, options(cfg, tmp_path / "c", tso=1), cn_of(cfg))
        future = (int(dt.datetime.now().timestamp() * 1000) + 3_600_000) << 22
        with pytest.raises(BackfillError, match="in the future"):
            # (Spark starts before the low watermark that shows it: give it the running one)
            await asyncio.to_thread(
                run, cfg, options(cfg, tmp_path / "d", tso=future), cn_of(cfg), spark=spark
            )


TYPES = (
    "CREATE TABLE IF NOT EXISTS shop.kinds (id INT NOT NULL PRIMARY KEY, "
    "big BIGINT UNSIGNED NULL, f FLOAT NULL, d DOUBLE NULL, t TIME(6) NULL, y YEAR NULL, "
    "b BIT(10) NULL, s SET('a','b','c') NULL, j JSON NULL, txt VARCHAR(40) NULL, "
    "bin VARBINARY(8) NULL, ts TIMESTAMP(6) NULL, dt DATETIME(3) NULL, dd DATE NULL, "
    "dn DECIMAL(12,2) NULL, dw DECIMAL(38,12) NULL, e ENUM('x','y z') NULL, bl BLOB NULL, "
    "ch CHAR(4) NULL, ti TINYINT UNSIGNED NULL)"
)
KINDS = [
    (1, 18446744073709551615, 1.1, 2.5e300, "838:59:59", 2024, 5, "a,c", '{"k": [1]}', "", b"",
     "2024-02-29 23:59:59.5", "1999-12-31 23:59:59.125", "2000-01-01", "1234567890.12",
     "12345678901234567890123456.123456789012", "y z", b"\x00\xff", "ab", 255),
    (2, 0, -3.25, -0.0, "-01:02:03.5", 1901, 1023, "", "null", '  a, "q"\n z ', b"\x00,\n\xff",
     "1970-01-01 00:00:01", "1000-01-01 00:00:00", "9999-12-31", "-0.01", "-0.000000000001",
     "x", b"", "", 0),
    (3, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None,
     None, None, None, None),
    (7, 1, 0.5, 0.0, "00:00:00", 2000, 0, "", "[]", "", b"", None, None, None, "0.00", "0",
     None, b"x" * 1000, "abcd", 7),  # '' is not NULL
]  # fmt: skip


def dn_rows(cfg, table: str) -> set[tuple]:
    """The logical table read straight from its shards with PyMySQL (values as the reference)."""
    from backfill.tables import load_catalogue, resolve

    rows = set()
    for shard in resolve(cfg, load_catalogue(cfg), [table])[0].shards:
        with shard.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {shard.qualified}")
            rows |= {tuple(key_value(v) for v in r) for r in cur.fetchall()}
    return rows


async def test_every_column_type_as_pymysql_reads_it_also_through_the_binlog(env, spark):
    """Both formats, at a TSO before updates and deletes of every row: the rows read by the
    tasks (changed ones dropped) and the ones rebuilt from the binlog equal the rows at T."""
    cfg, directory, _ = env
    await init(cfg)  # idempotent: this test may run alone
    cn = ComputeNode(cfg)
    await cn.start()
    try:
        async with Pipeline(cfg, directory):
            await cn.execute_ddl(TYPES, shard_key="id", partitions=2)
            async with cn.transaction() as tx:
                marks = ", ".join(["%s"] * len(KINDS[0]))
                cols = "id, big, f, d, t, y, b, s, j, txt, bin, ts, dt, dd, dn, dw, e, bl, ch, ti"
                for row in KINDS:
                    await tx.execute(f"INSERT INTO shop.kinds ({cols}) VALUES ({marks})", row)
                await tx.execute("INSERT INTO shop.kinds (id) VALUES (4), (5)")
            expected = await asyncio.to_thread(dn_rows, cfg, "shop.kinds")
            tso = await cn.tso.next()
            async with cn.transaction() as tx:
                await tx.execute("UPDATE shop.kinds SET txt = 'changed', f = 9 WHERE id IN (1, 2)")
                await tx.execute("DELETE FROM shop.kinds WHERE id = 3")
                await tx.execute("INSERT INTO shop.kinds (id) VALUES (6)")
            for fmt in ("parquet", "csv"):
                out = directory / f"kinds-{fmt}"
                opts = options(cfg, out, tso=tso, tables=["shop.kinds"], fmt=fmt)
                manifest = await asyncio.to_thread(run, cfg, opts, cn_of(cfg), spark=spark)
                (t,) = manifest.tables
                got = snapshot_rows(out, manifest, t)
                assert t.rows == len(got) == 6, fmt
                assert got == expected, f"{fmt}: {got ^ expected}"
    finally:
        await cn.close()


CODES = "CREATE TABLE IF NOT EXISTS shop.codes (code VARCHAR(20) NOT NULL PRIMARY KEY, n INT)"
PAIRS = (
    "CREATE TABLE IF NOT EXISTS shop.pairs (code VARCHAR(12) NOT NULL, tag VARBINARY(4) NOT NULL, "
    "n INT, PRIMARY KEY (code, tag))"
)


def where_in(sql: str, ids: range) -> str:
    return f"{sql} WHERE code IN ({', '.join(['%s'] * len(ids))})"


def codes_of(codes: list[str], ids: range) -> list[str]:
    return [codes[i] for i in ids]


async def test_string_and_composite_keys_are_chunked_by_sampled_bounds(env, spark):
    """Keys whose first column is not an integer are split at sampled keys (row-value ranges);
    the chunks together hold every row once, and changed keys are reconciled."""
    from backfill.native import plan
    from backfill.tables import load_catalogue, resolve

    cfg, directory, _ = env
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    words = ["Zebra", "apple", "Äpfel", "élan", "o'brien", "back\\slash", "x y", "ßtraße"]
    try:
        async with Pipeline(cfg, directory):
            await cn.execute_ddl(CODES, shard_key="code", partitions=2)
            await cn.execute_ddl(PAIRS, shard_key="code", partitions=2)
            async with cn.transaction() as tx:
                for start in range(0, 1000, 250):
                    ids = range(start, start + 250)
                    codes = [(f"{words[i % 8]}-{i}", i) for i in ids]
                    marks = ", ".join(["(%s, %s)"] * len(codes))
                    await tx.execute(
                        f"INSERT INTO shop.codes (code, n) VALUES {marks}",
                        [v for c in codes for v in c],
                    )
                    pairs = [
                        (words[i % 8][:5] + str(i % 100), bytes([i // 100, i % 7]), i) for i in ids
                    ]
                    marks = ", ".join(["(%s, %s, %s)"] * len(pairs))
                    await tx.execute(
                        f"INSERT INTO shop.pairs (code, tag, n) VALUES {marks}",
                        [v for p in pairs for v in p],
                    )
            names = ["shop.codes", "shop.pairs"]
            expected = {t: await asyncio.to_thread(dn_rows, cfg, t) for t in names}
            tso = await cn.tso.next()
            code = [f"{words[i % 8]}-{i}" for i in range(1000)]
            pair = [words[i % 8][:5] + str(i % 100) for i in range(1000)]
            changed, gone, moved = range(0, 1000, 97), range(5, 1000, 89), range(0, 1000, 101)
            async with cn.transaction() as tx:  # after T: reconciled back to the rows at T
                await tx.execute(
                    where_in("UPDATE shop.codes SET n = -1", changed), codes_of(code, changed)
                )
                await tx.execute(where_in("DELETE FROM shop.codes", gone), codes_of(code, gone))
                await tx.execute("INSERT INTO shop.codes (code, n) VALUES ('new', 1)")
                await tx.execute(
                    where_in("UPDATE shop.pairs SET tag = X'ffff'", moved)
                    + f" AND n IN {tuple(moved)}",
                    codes_of(pair, moved),
                )
            specs = await asyncio.to_thread(lambda: resolve(cfg, load_catalogue(cfg), names))
            chunks = await asyncio.to_thread(lambda: [len(plan(s, 300)) for s in specs])
            assert all(c >= 2 * len(s.shards) for c, s in zip(chunks, specs, strict=True)), chunks
            out = directory / "keys"
            manifest = await asyncio.to_thread(
                run, cfg, options(cfg, out, tso=tso, tables=names), cn_of(cfg), spark=spark
            )
    finally:
        await cn.close()
    for t in manifest.tables:
        got = snapshot_rows(out, manifest, t)
        want = expected[f"{t.db}.{t.table}"]
        assert t.rows == len(got) == len(want) == 1000, t.table
        assert got == want, f"{t.table}: {got ^ want}"
