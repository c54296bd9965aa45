"""Concurrent transfers across the 3 DNs of the shared cluster, heartbeats running: the logical
total never changes and no XA branch is left prepared."""

from __future__ import annotations

import os

import pymysql

from cdc_equipment.cn import ComputeNode
from cdc_equipment.cn.workloads import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.ground_truth import read as read_ground_truth
from tests.cn.conftest import xa_prepared

# Seconds of transfers: a few prove the invariants (hundreds of transactions); scale for a long run.
SECONDS = float(os.environ.get("CDC_TEST_TRANSFER_SECONDS", "5"))


async def test_concurrent_transfers_keep_the_total(cn_config):
    cn = ComputeNode(cn_config)
    await cn.start()
    try:
        workload = TransferWorkload(cn, db="transfer_test", accounts=300, partitions=6)
        await workload.setup()
        assert await workload.totals() == (300, workload.expected_total)
        cn.start_heartbeat()
        stats = await run_workload(workload.step, threads=8, duration_s=SECONDS, seed=1)
        await cn.stop_heartbeat()
        print(stats.summary("transfer"))
        assert stats.committed > 0 and stats.failed == 0, stats.summary("transfer")
        assert cn.heartbeat.count > 0
        assert await workload.totals() == (300, workload.expected_total)
        # Transfers really span DNs.
        placement = cn.catalogue.table("transfer_test", "accounts").placement
        assert len(set(placement)) == 3
    finally:
        await cn.close()
    assert xa_prepared(cn_config) == {1: [], 2: [], 3: []}
    _check_commit_records(cn_config)
    entries = read_ground_truth(cn_config.cn.ground_truth_log)
    tsos = [e["tso"] for e in entries]
    assert len(tsos) == len(set(tsos)) >= stats.committed


def _check_commit_records(config) -> None:
    """Every commit record is on each of its participants, with the same TSO."""
    records: dict[int, dict[int, tuple]] = {}
    for node in config.dn:
        conn = pymysql.connect(host=node.host, port=node.port, user="root", password="")
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT txn_id, commit_tso, participants FROM __cdc__.__cdc_tx_log__ "
                    "WHERE aborted = 0"
                )
                for txn_id, tso, participants in cur.fetchall():
                    records.setdefault(txn_id, {})[node.id] = (tso, participants)
        finally:
            conn.close()
    assert records
    for txn_id, by_dn in records.items():
        (tso, participants), *_ = by_dn.values()
        expected = {int(d) for d in participants.split(",")}
        assert set(by_dn) == expected, (txn_id, by_dn)
        assert {v[0] for v in by_dn.values()} == {tso}


async def test_more_concurrent_transactions_than_pooled_connections(cn_config):
    """Each transaction holds its branch connections while it writes its commit records: those
    come from a pool of their own, or 8 transfers over 2 connections per DN would deadlock."""
    import asyncio

    cn = ComputeNode(cn_config, pool_size=2)
    await cn.start()
    try:
        workload = TransferWorkload(cn, db="transfer_test", accounts=300, partitions=6)
        await workload.setup()
        stats = await asyncio.wait_for(
            run_workload(workload.step, threads=8, duration_s=2, seed=2), 60
        )
        assert stats.committed > 0 and stats.failed == 0, stats.summary("transfer")
        assert await workload.totals() == (300, workload.expected_total)
    finally:
        await cn.close()
    assert xa_prepared(cn_config) == {1: [], 2: [], 3: []}
