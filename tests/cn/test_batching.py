"""Fewer round trips (cn.batch_round_trips): commit records of concurrent transactions in one
INSERT, with a recovery tombstone among them aborting only its own transaction; XA START / XA
END + XA PREPARE in one packet each; deferred writes (`Transaction.defer`) sent with the next
statement or with the prepare, in statement order; no `;` through the router (branch
connections accept several statements per packet)."""

from __future__ import annotations

import asyncio

import pymysql
import pytest

from cdc.cn_protocol import schema
from cdc.cn_protocol.branch import Branch
from cdc.cn_protocol.catalogue import partition_of
from cdc.cn_protocol.record_batch import CommitRecords
from cdc_equipment.cn import RoutingError, TransactionAborted

UPSERT = "INSERT INTO batching.t (id, v) VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = v + 1"


async def make_table(cn, name: str, columns: str, partitions: int) -> None:
    await cn.execute_ddl(
        f"CREATE TABLE IF NOT EXISTS batching.{name} (id INT PRIMARY KEY, {columns})",
        shard_key="id",
        partitions=partitions,
    )


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
    await make_table(cn, "t", "v INT", 4)
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
    await make_table(cn, "u", "v INT NOT NULL", 2)
    tx = cn.transaction()
    with pytest.raises(pymysql.err.MySQLError):  # NULL into NOT NULL: fails after XA START
        await tx.execute("INSERT INTO batching.u (id, v) VALUES (1, NULL)")
    await tx.rollback()
    async with cn.transaction() as tx:  # the connection is clean again
        await tx.execute("INSERT INTO batching.u (id, v) VALUES (1, 1)")
    assert tx.commit_tso is not None


async def test_semicolons_are_refused(cn):
    await make_table(cn, "s", "s VARCHAR(20)", 2)
    async with cn.transaction() as tx:
        with pytest.raises(RoutingError, match="one statement at a time"):
            await tx.execute("UPDATE batching.t SET v = 1 WHERE id = 1; DROP TABLE batching.t")
        await tx.rollback()
    async with cn.transaction() as tx:  # a `;` inside a literal is data
        await tx.execute("INSERT IGNORE INTO batching.s (id, s) VALUES (1, %s)", ("a;b",))
    async with cn.transaction() as tx:
        got = await tx.execute("SELECT s FROM batching.s WHERE id = 1")
    assert got.rows == [("a;b",)]


async def test_deferred_writes_go_with_prepare_and_keep_statement_order(cn):
    await make_table(cn, "d", "v INT NOT NULL", 4)
    table = cn.catalogue.table("batching", "d")
    on_dn: dict[int, list[int]] = {}
    for k in range(1000):
        on_dn.setdefault(table.placement[partition_of(k, table.partitions)], []).append(k)
    (dn_a, keys_a), (dn_b, keys_b) = list(on_dn.items())[:2]
    packets: list[tuple[int, int]] = []  # (dn, statements) per branch round trip
    send = Branch._send

    async def counting(self, sql, end):
        packets.append((self.dn_id, len(self.pending) + (sql is not None) + 2 * end))
        return await send(self, sql, end)

    Branch._send = counting
    try:
        async with cn.transaction() as tx:  # single DN: write + prepare in one packet
            await tx.defer("INSERT INTO batching.d (id, v) VALUES (%s, 1)", (keys_a[0],))
            await tx.defer("UPDATE batching.d SET v = 2 WHERE id = %s", (keys_a[0],))
        # INSERT, UPDATE, XA END, XA PREPARE (and XA START) in one packet; then XA COMMIT
        assert tx.commit_tso is not None and packets == [(dn_a, 4), (dn_a, 1)]
        packets.clear()
        async with cn.transaction() as tx:  # A, then B: A's write is sent before B's
            await tx.defer("INSERT INTO batching.d (id, v) VALUES (%s, 1)", (keys_a[1],))
            await tx.defer("INSERT INTO batching.d (id, v) VALUES (%s, 1)", (keys_b[0],))
            got = await tx.execute("SELECT v FROM batching.d WHERE id = %s", (keys_b[0],))
            assert got.rows == [(1,)]  # B's deferred write went with the SELECT
        assert packets[:2] == [(dn_a, 1), (dn_b, 2)]
        async with cn.transaction() as tx:  # deferred writes that change nothing: read-only
            await tx.defer("UPDATE batching.d SET v = 2 WHERE id = %s", (keys_a[0],))
        assert tx.commit_tso is None
    finally:
        Branch._send = send
    async with cn.transaction() as tx:
        got = await tx.execute("SELECT v FROM batching.d WHERE id = %s", (keys_a[0],))
    assert got.rows == [(2,)]


async def test_a_failing_deferred_write_rolls_back_at_commit(cn):
    await make_table(cn, "f", "v INT NOT NULL", 2)
    tx = cn.transaction()
    await tx.defer("INSERT INTO batching.f (id, v) VALUES (7, 1)")
    await tx.defer("INSERT INTO batching.f (id, v) VALUES (8, NULL)")  # fails when sent
    with pytest.raises(TransactionAborted, match="deferred write failed"):
        await tx.commit()
    for dn in cn.catalogue.dns:
        assert not await cn.ctx.pools.execute(dn, "XA RECOVER")
    async with cn.transaction() as tx:
        got = await tx.execute("SELECT id FROM batching.f WHERE id IN (7, 8)")
    assert got.rows == []
