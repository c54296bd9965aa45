"""Markers: CdcStart from `cdc cn init`, DDL records, FlushLogs, and scale-out (StorageChange,
partition moves, MetaChange) with the data intact and routed to the new DN."""

from __future__ import annotations

import json

import pymysql

from cdc.config import Config
from cdc_equipment.cn import ComputeNode
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from tests.cn.conftest import cli


def private_rows(config: Config, sql: str) -> dict[int, list[tuple]]:
    out = {}
    for node in config.dn:
        conn = pymysql.connect(host=node.host, port=node.port, user="root", password="")
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                out[node.id] = list(cur.fetchall())
        finally:
            conn.close()
    return out


async def test_cdc_start_ddl_records_and_flush_logs(cn, cn_config):
    starts = private_rows(
        cn_config, "SELECT id, content FROM __cdc__.__cdc_instruction__ WHERE type='CdcStart'"
    )
    assert starts[1] and starts[1] == starts[2] == starts[3]  # one consistent cut on all DNs
    topo = json.loads(starts[1][0][1])
    assert [d["id"] for d in topo["dns"]] == [1, 2, 3] and "tables" in topo

    ddl = [
        "CREATE TABLE ddl_test.items (id BIGINT UNSIGNED PRIMARY KEY, name VARCHAR(20))",
        "ALTER TABLE ddl_test.items ADD COLUMN price DECIMAL(10,2) NULL",
        "ALTER TABLE ddl_test.items ADD INDEX by_name (name)",
        "ALTER TABLE ddl_test.items MODIFY COLUMN name VARCHAR(40) NOT NULL",
        "ALTER TABLE ddl_test.items DROP INDEX by_name",
        "ALTER TABLE ddl_test.items DROP COLUMN price",
        "TRUNCATE TABLE ddl_test.items",
        "DROP TABLE ddl_test.items",
    ]
    await cn.execute_ddl("DROP TABLE IF EXISTS ddl_test.items")
    tsos = []
    for i, sql in enumerate(ddl):
        tsos.append(await cn.execute_ddl(sql, shard_key="id", partitions=3))
        if i == 0:
            async with cn.transaction() as tx:
                await tx.execute("INSERT INTO ddl_test.items (id, name) VALUES (1, 'a'), (2, 'b')")
        if i == 1:
            schema = cn.catalogue.table("ddl_test", "items").schema
            assert [c["name"] for c in schema["columns"]] == ["id", "name", "price"]
            assert schema["create"].startswith("CREATE TABLE `items`")
    assert tsos == sorted(tsos)
    records = private_rows(
        cn_config,
        "SELECT ddl, schema_json FROM __cdc__.__cdc_ddl_record__ WHERE db='ddl_test' ORDER BY id",
    )
    assert [r[0] for r in records[1][-len(ddl) :]] == ddl
    assert records[1] == records[2] == records[3]
    assert json.loads(records[1][-1][1]) is None  # dropped
    assert not cn.catalogue.has("ddl_test", "items")

    flush_tso = await cn.flush_logs()
    assert flush_tso > tsos[-1]
    flushes = private_rows(
        cn_config, "SELECT id FROM __cdc__.__cdc_instruction__ WHERE type='FlushLogs'"
    )
    assert flushes[1] == flushes[2] == flushes[3] != []


async def test_scale_out_moves_partitions(small_cluster, small_config, tmp_path):
    cn = ComputeNode(small_config)
    await cn.start()
    try:
        workload = TransferWorkload(cn, db="scale", accounts=120, partitions=6)
        await workload.setup()
        await cn.execute_ddl(
            "CREATE TABLE IF NOT EXISTS scale.rates (code CHAR(3) PRIMARY KEY, rate INT)",
            broadcast=True,
        )
        async with cn.transaction() as tx:
            await tx.execute("INSERT IGNORE INTO scale.rates (code, rate) VALUES ('EUR', 1)")
    finally:
        await cn.close()

    config = small_cluster.config()  # DN 3 is running but not yet in the CN's topology
    config_file = tmp_path / "cdc.toml"
    config.dump(config_file)
    res = cli("cn", "add-dn", "--config", str(config_file))
    assert res.returncode == 0, res.stderr
    assert "DN 3 added" in res.stdout and "partition(s) moved" in res.stdout, res.stdout

    cn = ComputeNode(config)
    await cn.start()
    try:
        table = cn.catalogue.table("scale", "accounts")
        assert cn.catalogue.dns == [1, 2, 3] and table.placement.count(3) == 2
        workload = TransferWorkload(cn, db="scale", accounts=120)
        assert await workload.totals() == (120, workload.expected_total)
        for _ in range(30):
            await workload.step(__import__("random").Random(7))
        assert await workload.totals() == (120, workload.expected_total)
        async with cn.transaction() as tx:
            await tx.execute("UPDATE scale.rates SET rate = rate + 1 WHERE code = 'EUR'")
        await cn.heartbeat_once()
    finally:
        await cn.close()
    rates = private_rows(config, "SELECT rate FROM scale_p.rates_b")
    assert rates[1] == rates[2] == rates[3] == [(2,)]
    changes = private_rows(
        config,
        "SELECT type, content FROM __cdc__.__cdc_instruction__ WHERE type IN "
        "('StorageChange', 'MetaChange') ORDER BY id",
    )
    # StorageChange is written by the existing DNs only; the new DN takes part from then on.
    # Then one MetaChange per moved partition (each its own cluster change).
    kinds = [c[0] for c in changes[1]]
    assert kinds[0] == "StorageChange" and set(kinds[1:]) == {"MetaChange"}, kinds
    assert changes[1] == changes[2] and changes[3] == changes[1][1:]
    assert json.loads(changes[1][0][1])["added"] == [3]
    metas = [json.loads(c[1]) for c in changes[3]]
    ours = [
        m for meta in metas for m in meta["moved"] if (m["db"], m["table"]) == ("scale", "accounts")
    ]
    assert len(ours) == 2 and all(m["to"] == 3 for m in ours)  # 6 partitions over 3 DNs
    moved = {m["partition"] for m in ours}
    # Old copies are gone from their source DNs.
    for m in ours:
        tables = private_rows(config, "SHOW TABLES FROM scale_p")
        assert (f"accounts_p{m['partition']:04d}",) not in tables[m["from"]]
        assert (f"accounts_p{m['partition']:04d}",) in tables[3]
    assert moved
