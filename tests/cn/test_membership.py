"""Several CN processes, one catalogue (cdc_equipment/cn/membership.py): two ComputeNodes here are two CN
processes to the GMS — each its own instance, lease, gate and catalogue."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from cdc_equipment.cn import CatalogueError, ComputeNode, TransactionAborted
from tests.cn.conftest import with_cn

DB = "members"


async def started(config) -> ComputeNode:
    cn = ComputeNode(config)
    await cn.start(recover=False)
    return cn


@contextlib.asynccontextmanager
async def two_cns(config):
    a, b = await started(config), await started(config)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def make_table(cn: ComputeNode, name: str = "t") -> None:
    await cn.execute_ddl(f"DROP TABLE IF EXISTS {DB}.{name}")
    await cn.execute_ddl(
        f"CREATE TABLE {DB}.{name} (id INT PRIMARY KEY, v INT NOT NULL)",
        shard_key="id",
        partitions=4,
    )


async def test_a_ddl_reaches_every_cn_before_it_writes_again(cn_config):
    """B learns A's new column without reloading by hand, and a transaction B started before
    the DDL finishes first: A's DDL waits for it."""
    async with two_cns(cn_config) as (a, b):
        await make_table(a)
        assert b.catalogue.has(DB, "t")  # B followed the CREATE
        lines: list[str] = []
        async with b.transaction() as tx:
            await tx.execute(f"INSERT INTO {DB}.t (id, v) VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
            ddl = asyncio.create_task(
                a.execute_ddl(f"ALTER TABLE {DB}.t ADD COLUMN w INT NULL", progress=lines.append)
            )
            await asyncio.sleep(0.5)
            assert not ddl.done()  # frozen on B's partitions: waiting for B's transaction
        await ddl
        columns = [c["name"] for c in b.catalogue.table(DB, "t").schema["columns"]]
        assert columns == ["id", "v", "w"]
        assert any("CNs acknowledged the freeze" in line for line in lines), lines
        async with b.transaction() as tx:
            await tx.execute(f"UPDATE {DB}.t SET w = 7 WHERE id = 1")


async def test_a_cn_that_does_not_acknowledge_is_named(cn_config):
    quick = with_cn(cn_config, change_timeout_ms=1500)
    async with two_cns(quick) as (a, b):
        await make_table(a, "slow")
        async with b.transaction() as tx:
            await tx.execute(f"INSERT INTO {DB}.slow (id, v) VALUES (1, 1)")
            with pytest.raises(CatalogueError) as err:
                await a.execute_ddl(f"ALTER TABLE {DB}.slow ADD COLUMN w INT NULL")
        assert f"CN instance {b.instance_id}" in str(err.value), err.value
        assert "did not acknowledge" in str(err.value)
        # Nothing changed, nothing stays frozen: both write on.
        assert [c["name"] for c in a.catalogue.table(DB, "slow").schema["columns"]] == ["id", "v"]
        for cn in (a, b):
            async with cn.transaction() as tx:
                await tx.execute(f"UPDATE {DB}.slow SET v = v + 1 WHERE id = 1")


async def test_a_dead_cn_blocks_nobody_after_its_lease(cn_config):
    """A CN killed without leaving (its row stays) is waited for only until its lease ends."""
    short = with_cn(cn_config, lease_ms=1500)
    async with two_cns(short) as (a, dead):
        await make_table(a, "gone")
        task = dead.ctx.membership._task
        task.cancel()  # stops renewing, as a SIGKILLed process would
        began = time.monotonic()
        await a.execute_ddl(f"ALTER TABLE {DB}.gone ADD COLUMN w INT NULL")
        assert time.monotonic() - began < 10
        assert not dead.ctx.membership.lease_ok()


async def test_a_cn_joining_during_a_change_starts_frozen(cn_config):
    a = await started(cn_config)
    try:
        await make_table(a, "join")
        async with _frozen(a, "join") as keys:
            b = await started(cn_config)
            try:
                assert b.ctx.gate._frozen[next(iter(keys))] > 0
            finally:
                await b.close()
    finally:
        await a.close()


class _frozen:
    """Hold a cluster change on a table's partitions (what a DDL does in its middle)."""

    def __init__(self, cn: ComputeNode, table: str):
        from cdc_equipment.cn.cluster_change import cluster_change

        self._cm = cluster_change(cn.ctx, cn.store, f"test freeze {table}")
        self._cn, self._table = cn, table

    async def __aenter__(self):
        change = await self._cm.__aenter__()
        t = self._cn.catalogue.table(DB, self._table)
        keys = {(t.db, t.name, p) for p in range(t.partitions)}
        await change.freeze(keys)
        return keys

    async def __aexit__(self, *exc):
        return await self._cm.__aexit__(*exc)


async def test_a_cn_whose_lease_lapsed_stops_then_catches_up(cn_config):
    """Past its lease (here: forced), a CN refuses to commit, then registers again, reloads the
    catalogue and writes on."""
    async with two_cns(cn_config) as (a, b):
        await make_table(a, "lapse")
        async with b.transaction() as tx:
            await tx.execute(f"INSERT INTO {DB}.lapse (id, v) VALUES (1, 1)")
            b.ctx.membership._valid_until = 0.0  # as if the GMS had been unreachable
            with pytest.raises(TransactionAborted, match="lease"):
                await tx.commit()
        deadline = time.monotonic() + 10
        while not b.ctx.membership.lease_ok():
            assert time.monotonic() < deadline, "the CN did not rejoin"
            await asyncio.sleep(0.05)
        async with b.transaction() as tx:
            await tx.execute(f"INSERT INTO {DB}.lapse (id, v) VALUES (2, 2)")
        async with a.transaction() as tx:
            res = await tx.execute(f"SELECT id FROM {DB}.lapse")
        assert sorted(r[0] for r in res.rows) == [2]  # the refused commit left nothing
