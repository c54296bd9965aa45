"""End to end on a cluster of its own: the reference CN runs transfers over 3 DNs while the
pipeline writes the global binlog; the binlog is checked against the CN's ground truth."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from cdc.cluster.testing import throwaway_cluster
from cdc.cn import ComputeNode, init
from cdc.cn.ground_truth import read as read_ground_truth
from cdc.cn.workloads.runner import run_workload
from cdc.cn.workloads.transfer import TransferWorkload
from dumper.service import serve
from tests.e2e.global_binlog import Txn, read_global_binlog

ACCOUNTS = 100
BALANCE = 1000


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    directory = tmp_path_factory.mktemp("e2e")
    cluster = throwaway_cluster(directory / "cluster", dns=3)
    cfg = cluster.config()
    cfg.dumper.binlog_dir = str(directory / "binlog")
    cfg.cn.ground_truth_log = str(directory / "truth.jsonl")
    cfg.pipeline.checkpoint_interval_ms = 200
    try:
        yield cfg, directory
    finally:
        cluster.down()


async def run_pipeline_while(cfg, directory, work):
    """Run the pipeline until `work` is done and the binlog has caught up with the CN."""
    service = asyncio.create_task(serve(cfg, directory / "pipeline", heartbeat=True))
    try:
        result = await work()
        await asyncio.sleep(1.5)  # a few heartbeats: everything committed is merged by then
        assert not service.done(), service.exception()
        return result
    finally:
        service.cancel()
        with pytest.raises(asyncio.CancelledError):
            await service


def check_transfer_invariant(txns: list[Txn]) -> int:
    """Replay the row changes: after every transaction the total balance is unchanged."""
    balances: dict[int, int] = {}
    checked = 0
    for txn in txns:
        for db, table, kind, rows in txn.changes:
            assert (db, table) == ("bank", "accounts"), "physical names leaked or wrong table"
            for row in rows:
                if kind == "write":
                    balances[row[0]] = row[1]
                elif kind == "update":
                    before, after = row
                    assert balances[before[0]] == before[1], "before-image disagrees with history"
                    balances[after[0]] = after[1]
                else:
                    balances.pop(row[0])
        if len(balances) == ACCOUNTS:
            assert sum(balances.values()) == ACCOUNTS * BALANCE, f"total changed at TSO {txn.tso}"
            checked += 1
    return checked


async def test_transfers_come_out_once_in_tso_order_with_the_total_unchanged(e2e):
    cfg, directory = e2e
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)

    async def work():
        await workload.setup()
        return await run_workload(workload.step, threads=8, duration_s=8)

    try:
        stats = await run_pipeline_while(cfg, directory, work)
    finally:
        await cn.close()
    assert stats.committed > 100 and stats.failed == 0

    txns = read_global_binlog(directory / "binlog")
    tsos = [t.tso for t in txns]
    assert tsos == sorted(tsos) and len(set(tsos)) == len(tsos), (
        "global binlog is not in strict TSO order"
    )
    truth = {e["tso"]: e for e in read_ground_truth(cfg.cn.ground_truth_log)}
    written = [t for t in txns if t.ddl is None]
    assert all(t.tso in truth for t in written), "a transaction the CN never committed"
    transfers = [t for t in written if any(kind == "update" for _, _, kind, _ in t.changes)]
    assert len(transfers) == stats.committed, "lost or duplicated transfers"
    assert [t.ddl for t in txns if t.ddl] == [
        "CREATE TABLE IF NOT EXISTS bank.accounts (id INT UNSIGNED NOT NULL PRIMARY KEY, "
        "balance BIGINT NOT NULL, updated_at DATETIME(6) NULL)"
    ]
    assert check_transfer_invariant(txns) >= stats.committed
    # An independent reader accepts every event and checksum.
    res = subprocess.run(
        ["mariadb-binlog", "--verify-binlog-checksum", str(directory / "binlog" / "binlog.000001")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr


async def test_restart_continues_without_gap_or_duplicate(e2e):
    cfg, directory = e2e
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=6)
    before = read_global_binlog(directory / "binlog")
    # Transfers while the pipeline is down, then more with it up again.
    down = await run_workload(workload.step, threads=4, duration_s=2)

    async def work():
        return await run_workload(workload.step, threads=4, duration_s=3)

    try:
        up = await run_pipeline_while(cfg, directory, work)
    finally:
        await cn.close()
    txns = read_global_binlog(directory / "binlog")
    tsos = [t.tso for t in txns]
    assert tsos == sorted(tsos) and len(set(tsos)) == len(tsos)
    assert tsos[: len(before)] == [t.tso for t in before]
    new_transfers = [t for t in txns[len(before) :] if t.changes]
    assert len(new_transfers) == down.committed + up.committed
    check_transfer_invariant(txns)
