"""The mariadb flavour end to end: `[dumper] flavor = "mariadb"` on a cluster of its own; a real
MariaDB replica follows the dumper with MASTER_USE_GTID=slave_pos, is stopped and forgets its
file/position (RESET SLAVE) while more transfers commit and the dumper restarts, then resumes
by its GTID alone: exactly the transactions it lacked (`cdc check` equal, GTID positions
equal, no replication error); START SLAVE UNTIL master_gtid_pos stops it where it says."""

from __future__ import annotations

import asyncio
import time

import pymysql
import pytest

from cdc_equipment.checks.downstream import run_check
from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster, throwaway_server
from tests.e2e.test_pipeline import ACCOUNTS, BALANCE, run_pipeline_while

DOMAIN = 3


@pytest.fixture
def mariadb_flavor(tmp_path):
    cluster = throwaway_cluster(tmp_path / "cluster", dns=2, spare_dns=0)
    cfg = cluster.config()
    cfg.dumper.flavor = "mariadb"
    cfg.dumper.version = "10.11.19-MariaDB-cdc-log"
    cfg.dumper.gtid_domain_id = DOMAIN
    cfg.dumper.binlog_dir = str(tmp_path / "binlog")
    cfg.cn.ground_truth_log = str(tmp_path / "truth.jsonl")
    cfg.pipeline.checkpoint_interval_ms = 200
    cfg.pipeline.max_file_size_mb = 1  # several files: the GTID start looks across them
    cfg.dumper.port = free_base_port(0)
    replica = throwaway_server(tmp_path, server_id=500)
    try:
        yield cfg, tmp_path, replica
    finally:
        replica.stop()
        cluster.down()


def dumper_gtid_pos(port: int, domain: int = DOMAIN) -> str:
    conn = pymysql.connect(
        host="127.0.0.1", port=port, user=DEFAULT_USER, password=DEFAULT_PASSWORD
    )
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@version, @@gtid_domain_id, @@gtid_binlog_pos")
            version, domain_id, pos = cur.fetchone()
    finally:
        conn.close()
    assert "MariaDB" in version and int(domain_id) == domain
    return pos


def follow_by_gtid(replica, port: int, domain: int = DOMAIN) -> str:
    """(Re)point the replica at the dumper by GTID only (no file/position) and wait until its
    gtid_slave_pos is the dumper's gtid_binlog_pos; returns that position. `domain`: the
    dumper's GTID domain (a stream's: `cdc.streams.stream_gtid_domain`)."""
    with replica.connect() as conn, conn.cursor() as cur:
        point_by_gtid(cur, port)
        cur.execute("START SLAVE")
        deadline = time.monotonic() + 90
        while True:
            # Read each time: a new leader may still be writing what was committed before the
            # traffic stopped (a target read once can fall behind the replica).
            target = dumper_gtid_pos(port, domain)
            assert target.startswith(f"{domain}-")
            cur.execute("SHOW SLAVE STATUS")
            row = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
            assert row["Last_IO_Error"] == "" and row["Last_SQL_Error"] == "", row
            assert row["Using_Gtid"] == "Slave_Pos", row
            cur.execute("SELECT @@gtid_slave_pos")
            (slave_pos,) = cur.fetchone()
            if slave_pos == target:
                return slave_pos
            assert time.monotonic() < deadline, f"replica at {slave_pos!r}, dumper at {target!r}"
            time.sleep(0.2)


def point_by_gtid(cur, port: int) -> None:
    cur.execute("STOP SLAVE")
    cur.execute("RESET SLAVE")  # forget the file/position: only the GTID is left
    cur.execute(
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, "
        f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}', "
        "MASTER_USE_GTID=slave_pos, MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1"
    )


def run_until_gtid(replica, port: int, until: str) -> str:
    """START SLAVE UNTIL master_gtid_pos = `until`: both replication threads stop by
    themselves (the dumper tells the replica it got there); the replica's GTID position."""
    with replica.connect() as conn, conn.cursor() as cur:
        point_by_gtid(cur, port)
        cur.execute(f"START SLAVE UNTIL master_gtid_pos = '{until}'")
        deadline = time.monotonic() + 60
        while True:
            cur.execute("SHOW SLAVE STATUS")
            row = dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))
            assert row["Last_IO_Error"] == "" and row["Last_SQL_Error"] == "", row
            if row["Slave_IO_Running"] == "No" and row["Slave_SQL_Running"] == "No":
                break
            assert time.monotonic() < deadline, f"the replica did not stop at {until}: {row}"
            time.sleep(0.2)
        cur.execute("SELECT @@gtid_slave_pos")
        return cur.fetchone()[0]


def stop_replica(replica) -> None:
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute("STOP SLAVE")


def balances(replica) -> tuple[int, int]:
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*), SUM(balance) FROM bank.accounts")
        count, total = cur.fetchone()
    return int(count), int(total)


# Found by this test (MariaDB 10.11.19): in GTID mode the replica's I/O thread refuses any
# group event after a group's end that is not a GTID ("The current group of events starts with
# a non-GTID MySQL Rows_query event; the last seen GTID is 3-100-2", error 1595): the CTS mark
# after the XID was a ROWS_QUERY. In the mariadb flavour it is a BINLOG_CHECKPOINT, outside
# any group for MariaDB (`Log_event::is_group_event`), which its SQL thread applies as nothing.
async def test_a_mariadb_replica_follows_and_resumes_by_gtid(mariadb_flavor):
    cfg, directory, replica = mariadb_flavor
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=4)
    port = cfg.dumper.port
    positions = []
    try:

        async def first():
            await workload.setup()
            return await run_workload(workload.step, threads=4, duration_s=3)

        async def follow():
            positions.append(await asyncio.to_thread(follow_by_gtid, replica, port))
            await asyncio.to_thread(stop_replica, replica)

        await run_pipeline_while(cfg, directory, first, follow)
        assert balances(replica) == (ACCOUNTS, ACCOUNTS * BALANCE)
        # More transfers while the replica is stopped (the dumper restarts in between).

        async def more():
            return await run_workload(workload.step, threads=4, duration_s=3)

        async def resume():
            # START SLAVE UNTIL a GTID between where it stopped and the dumper's last: it stops
            # there by itself, then follows on.
            domain, server, last = dumper_gtid_pos(port).split("-")
            until = f"{domain}-{server}-{(int(positions[0].split('-')[2]) + int(last)) // 2}"
            assert await asyncio.to_thread(run_until_gtid, replica, port, until) == until
            positions.append(await asyncio.to_thread(follow_by_gtid, replica, port))
            report = await asyncio.to_thread(
                run_check, cfg, replica.host, replica.port, "root", "", 60
            )
            assert report.equal, report.render()

        up = await run_pipeline_while(cfg, directory, more, resume)
    finally:
        await cn.close()
    assert up.committed > 0
    first_seq, last_seq = (int(p.split("-")[2]) for p in positions)
    assert last_seq > first_seq
    assert balances(replica) == (ACCOUNTS, ACCOUNTS * BALANCE)
    # The files carry MariaDB GTIDs that mariadb-binlog reads with their checksums.
    from tests.binlog_writer.test_recovery import readable

    names = sorted(directory.glob("binlog/binlog.0*"))
    assert len(names) > 1 and all(readable(p) for p in names)
    # `cdc locate` names the replica's last transaction by its MariaDB GTID as by its TSO.
    from binlog_writer import locate

    found = locate.by_gtid_text(directory / "binlog", "binlog", positions[-1])
    assert found.gtids == (positions[-1],) and found.mark.startswith("CTS::")
    assert locate.by_tso(directory / "binlog", "binlog", found.tso) == found


async def test_after_a_failover_the_replica_follows_the_new_leader_by_gtid(mariadb_flavor):
    """HA: two dumpers (leader + follower copying its files); the replica follows the leader
    by GTID, the leader is SIGKILLed, the follower takes over, and the replica, re-pointed at
    it with MASTER_USE_GTID=slave_pos and nothing else, continues: `cdc check` equal."""
    from cdc.config import DumperPeer, load
    from tests.chaos.test_dumper_ha import Dumpers

    cfg, directory, replica = mariadb_flavor
    base = free_base_port(2)
    cfg.dumper.peers = [
        DumperPeer(i, port=base + i, binlog_dir=str(directory / f"d{i}" / "binlog")) for i in (1, 2)
    ]
    config_path = str(directory / "cdc.toml")
    cfg.dump(config_path)
    cfg = load(config_path)
    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    workload = TransferWorkload(cn, accounts=ACCOUNTS, initial_balance=BALANCE, partitions=4)
    dumpers = Dumpers(config_path, directory)
    try:
        await workload.setup()
        dumpers.start(1)
        await dumpers.wait(lambda: dumpers.role(1) == "leader", 60, "dumper 1 did not lead")
        dumpers.start(2)
        await dumpers.wait(lambda: dumpers.role(2) == "follower", 60, "no follower")
        await run_workload(workload.step, threads=4, duration_s=2)
        first = await asyncio.to_thread(follow_by_gtid, replica, base + 1)
        stop = asyncio.Event()
        load = asyncio.create_task(run_workload(workload.step, threads=3, duration_s=60, stop=stop))
        await asyncio.sleep(1.0)
        dumpers.kill(1)  # the replica's master dies under traffic
        await dumpers.wait(
            lambda: dumpers.role(2) == "leader" and dumpers.status(2).get("transactions", 0) > 0,
            60,
            "dumper 2 did not take over",
        )
        await asyncio.sleep(1.0)
        stop.set()
        await load
        last = await asyncio.to_thread(follow_by_gtid, replica, base + 2)
        report = await asyncio.to_thread(run_check, cfg, replica.host, replica.port, "root", "", 60)
        assert report.equal, report.render()
    finally:
        dumpers.stop()
        await cn.close()
    assert int(last.split("-")[2]) > int(first.split("-")[2])
    assert balances(replica) == (ACCOUNTS, ACCOUNTS * BALANCE)
