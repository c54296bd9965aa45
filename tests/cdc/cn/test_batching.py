"""Fewer round trips (cn.batch_round_trips): commit records of concurrent transactions in one
INSERT, with a recovery tombstone among them aborting only its own transaction; XA START / XA
END + XA PREPARE in one packet each; no `;` through the router (branch connections accept
several statements per packet)."""

from __future__ import annotations

import asyncio

import pymysql
import pytest

from cdc.cn import RoutingError, schema
from cdc.cn.record_batch import CommitRecords

UPSERT = "INSERT INTO batching.t (id, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1"


async def records_of(cn, dn: int, txn_ids: list[int]) -> dict[int, tuple]:
    marks = ", ".join(["%s"] * len(txn_ids))
    rows = await cn.ctx.pools.execute(
        dn,
        f"SELECT txn_id, commit_tso, aborted FROM `{schema.PRIVATE_DB}`.`{schema.TX_LOG}`"
        f" WHERE txn_id IN ({marks})",
        tuple(txn_ids),
    )
    return {r[0]: r[1:] for r in rows}


async def test_a_tombstone_in_a_batch_fails_only_its_own_record(cn):
    dn = cn.catalogue.dns[0]
    ids = [cn.ctx.next_txn_id() for _ in range(6)]
    doomed = ids[3]
    await cn.ctx.pools.execute(dn, schema.INSERT_TOMBSTONE, (doomed, 1))
    records = CommitRecords(cn.ctx.pools)
    try:
        results = await asyncio.gather(
            *(records.write(dn, (t, 1000 + i, str(dn)), upsert=False) for i, t in enumerate(ids)),
            return_exceptions=True,
        )
    finally:
        await records.close()
    failed = [t for t, r in zip(ids, results, strict=True) if isinstance(r, BaseException)]
    assert failed == [doomed]
    assert isinstance(results[3], pymysql.err.IntegrityError) and results[3].args[0] == 1062
    got = await records_of(cn, dn, ids)
    assert got[doomed] == (1, 1)  # the tombstone, untouched
    assert all(got[t] == (1000 + i, 0) for i, t in enumerate(ids) if t != doomed)


async def test_concurrent_commits_share_record_inserts_and_all_land(cn):
    await cn.execute_ddl(
        "CREATE TABLE IF NOT EXISTS batching.t (id INT PRIMARY KEY, v INT)",
        shard_key="id",
        partitions=4,
    )
    statements = records = 0
    insert = cn.ctx.records._insert

    async def counting(key, rows):
        nonlocal statements, records
        statements += 1
        records += len(rows)
        await insert(key, rows)

    cn.ctx.records._insert = counting

    async def one(i: int) -> tuple[int, int | None]:
        async with cn.transaction() as tx:
            await tx.execute(UPSERT, (i, i))
            if i % 3 == 0:  # some span two DNs (secondary records are batched too)
                await tx.execute(UPSERT, (i + 1000, i))
        return tx.txn_id, tx.commit_tso

    done = await asyncio.gather(*(one(i) for i in range(40)))
    assert len({tso for _, tso in done}) == 40
    assert statements < records  # some records shared an INSERT
    for dn in cn.catalogue.dns:
        got = await records_of(cn, dn, [t for t, _ in done])
        assert all(got[t][0] == tso for t, tso in done if t in got)
    primaries = set()
    for dn in cn.catalogue.dns:
        primaries |= (await records_of(cn, dn, [t for t, _ in done])).keys()
    assert primaries == {t for t, _ in done}
    for dn in cn.catalogue.dns:  # every branch committed
        assert not await cn.ctx.pools.execute(dn, "XA RECOVER")


async def test_a_failing_first_statement_leaves_no_branch(cn):
    await cn.execute_ddl(
        "CREATE TABLE IF NOT EXISTS batching.u (id INT PRIMARY KEY, v INT NOT NULL)",
        shard_key="id",
        partitions=2,
    )
    tx = cn.transaction()
    with pytest.raises(pymysql.err.MySQLError):  # NULL into NOT NULL: fails after XA START
        await tx.execute("INSERT INTO batching.u (id, v) VALUES (1, NULL)")
    await tx.rollback()
    async with cn.transaction() as tx:  # the connection is clean again
        await tx.execute("INSERT INTO batching.u (id, v) VALUES (1, 1)")
    assert tx.commit_tso is not None


async def test_semicolons_are_refused(cn):
    await cn.execute_ddl(
        "CREATE TABLE IF NOT EXISTS batching.s (id INT PRIMARY KEY, s VARCHAR(20))",
        shard_key="id",
        partitions=2,
    )
    async with cn.transaction() as tx:
        with pytest.raises(RoutingError, match="one statement at a time"):
            await tx.execute("UPDATE batching.t SET v = 1 WHERE id = 1; DROP TABLE batching.t")
        await tx.rollback()
    async with cn.transaction() as tx:  # a `;` inside a literal is data
        await tx.execute("INSERT IGNORE INTO batching.s (id, s) VALUES (1, %s)", ("a;b",))
    async with cn.transaction() as tx:
        got = await tx.execute("SELECT s FROM batching.s WHERE id = 1")
    assert got.rows == [("a;b",)]
