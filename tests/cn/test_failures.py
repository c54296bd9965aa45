"""Bad input and failures: unroutable SQL gets a clear error; a DN down during the commit
aborts the transaction everywhere (private 2-DN cluster); recovery settles the leftovers."""

from __future__ import annotations

import pytest

from cdc.cn_protocol import commit_protocol
from cdc.cn_protocol.catalogue import partition_of
from cdc_equipment.cn import ComputeNode, RoutingError, TransactionAborted
from tests.cn.conftest import cli, xa_prepared


async def test_unroutable_sql_is_a_clear_error(cn):
    await cn.execute_ddl(
        "CREATE TABLE IF NOT EXISTS bad_input.t (id INT PRIMARY KEY, v INT)",
        shard_key="id",
        partitions=4,
    )
    async with cn.transaction() as tx:
        with pytest.raises(RoutingError, match=r"needs `WHERE id = <value>`"):
            await tx.execute("UPDATE bad_input.t SET v = 1")
        with pytest.raises(TransactionAborted, match="earlier statement failed"):
            await tx.execute("SELECT * FROM bad_input.t WHERE id = 1")
        await tx.rollback()
    res = cli("workload", "transfer", "--config", "/nonexistent/cdc.toml")
    assert res.returncode == 1 and "not found" in res.stderr


def _keys_on_each_dn(table) -> tuple[int, int]:
    by_dn: dict[int, int] = {}
    for k in range(10_000):
        by_dn.setdefault(table.placement[partition_of(k, table.partitions)], k)
    return by_dn[1], by_dn[2]


async def test_dn_down_during_prepare_aborts_everywhere(small_cluster, small_config):
    cn = ComputeNode(small_config)
    await cn.start()
    try:
        await cn.execute_ddl(
            "CREATE TABLE IF NOT EXISTS f.acc (id INT PRIMARY KEY, balance INT NOT NULL)",
            shard_key="id",
            partitions=4,
        )
        k1, k2 = _keys_on_each_dn(cn.catalogue.table("f", "acc"))
        async with cn.transaction() as tx:
            await tx.execute(
                "INSERT IGNORE INTO f.acc (id, balance) VALUES (%s, 100), (%s, 100)", (k1, k2)
            )

        tx = cn.transaction()
        await tx.execute("UPDATE f.acc SET balance = balance - 10 WHERE id = %s", (k1,))
        await tx.execute("UPDATE f.acc SET balance = balance + 10 WHERE id = %s", (k2,))
        small_cluster.dn(2).kill()  # SIGKILL: DN 2 is gone when XA PREPARE is sent
        with pytest.raises(TransactionAborted, match="XA PREPARE failed on DN 2"):
            await tx.commit()
        small_cluster.dn(2).start()
        assert xa_prepared(small_config)[1] == []
        await cn.recover()
        assert xa_prepared(small_config) == {1: [], 2: []}
        async with cn.transaction() as tx:
            res = await tx.execute("SELECT id, balance FROM f.acc WHERE id IN (%s, %s)", (k1, k2))
        assert sorted(res.rows) == sorted([(k1, 100), (k2, 100)])

        # A DN lost after the decision: the primary's record commits it, recovery finishes.
        tx = cn.transaction()
        await tx.execute("UPDATE f.acc SET balance = balance - 10 WHERE id = %s", (k1,))
        await tx.execute("UPDATE f.acc SET balance = balance + 10 WHERE id = %s", (k2,))
        original = commit_protocol._write_secondary_records

        async def lose_dn2(*args):
            small_cluster.dn(2).kill()
            return await original(*args)

        commit_protocol._write_secondary_records = lose_dn2
        try:
            assert await tx.commit() is not None
        finally:
            commit_protocol._write_secondary_records = original
        small_cluster.dn(2).start()
        report = await cn.recover()
        assert tx.txn_id in report.committed, report
        assert xa_prepared(small_config) == {1: [], 2: []}
        async with cn.transaction() as tx:
            res = await tx.execute("SELECT id, balance FROM f.acc WHERE id IN (%s, %s)", (k1, k2))
        assert sorted(res.rows) == sorted([(k1, 90), (k2, 110)])
    finally:
        await cn.close()
