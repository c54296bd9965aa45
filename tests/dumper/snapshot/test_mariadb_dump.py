"""The standard way to seed a replica, against the dumper while transfers run:
`mariadb-dump --single-transaction --master-data=1 --databases bank shop`, loaded into an empty
MariaDB, which then replicates from the position the dump printed; `cdc check` then finds every
logical table equal. With the mariadb flavour, `--gtid`: the replica starts from the dump's GTID
alone. A snapshot not exactly at that position would lose or repeat transfers
(the replica stops on a duplicate key, or the checksums differ)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from checks import run_check
from local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from local_cluster.testing import throwaway_server
from tests.dumper.snapshot.conftest import ACCOUNTS, BALANCE, MARIADB_DOMAIN, running_snap
from tests.dumper.test_replica import _query, _slave_status

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(shutil.which("mariadb-dump") is None, reason="mariadb-dump missing"),
]


@pytest.fixture
def empty_mariadb(tmp_path):
    replica = throwaway_server(tmp_path, server_id=7777)  # none of the binlog's server ids
    try:
        yield replica
    finally:
        replica.stop()


def test_mariadb_dump_seeds_a_replica_at_its_position(snap, empty_mariadb, tmp_path):
    dump_and_replicate(snap, empty_mariadb, ["--databases", "bank", "shop"])


@pytest.fixture
def mariadb_snap(tmp_path):
    with running_snap(tmp_path / "mariadb", mariadb=True) as snap:
        yield snap


def test_mariadb_dump_gtid_seeds_a_replica_by_gtid(mariadb_snap, empty_mariadb):
    """The mariadb flavour: `--gtid` prints `SET GLOBAL gtid_slave_pos` with the GTID of the
    dump's snapshot (`@@gtid_binlog_pos` inside it); the replica then starts from that GTID
    alone (`MASTER_USE_GTID=slave_pos`)."""
    dump_and_replicate(mariadb_snap, empty_mariadb, ["--gtid", "--databases", "bank"], gtid=True)


def dump_and_replicate(snap, replica, args: list[str], *, gtid: bool = False) -> None:
    """`mariadb-dump --single-transaction --master-data=1 <args>` under transfers, loaded into
    `replica`, which then replicates from the dump's position (its GTID with `gtid`) until
    `cdc check` finds it equal."""
    port = snap.config.dumper.port
    dump = subprocess.run(
        [
            "mariadb-dump",
            "--single-transaction",
            "--master-data=1",
            *args,
            "-h127.0.0.1",
            f"-P{port}",
            f"-u{DEFAULT_USER}",
            f"-p{DEFAULT_PASSWORD}",
        ],
        capture_output=True,
        timeout=300,
    )
    assert dump.returncode == 0, dump.stderr.decode(errors="replace")
    text = dump.stdout.decode(errors="replace")  # BLOBs are raw bytes
    position = re.search(r"CHANGE MASTER TO MASTER_LOG_FILE='([^']+)', MASTER_LOG_POS=(\d+)", text)
    assert position, text[:2000]
    accounts = text.split("INSERT INTO `accounts` VALUES")[1].split(";\n", 1)[0]
    balances = re.findall(r"\((\d+),(-?\d+),", accounts)
    assert len(balances) == ACCOUNTS
    assert sum(int(b) for _, b in balances) == ACCOUNTS * BALANCE  # one moment, under transfers
    if gtid:
        gtid_pos = re.search(r"SET GLOBAL gtid_slave_pos='([^']*)'", text)
        assert gtid_pos and gtid_pos[1].startswith(f"{MARIADB_DOMAIN}-"), text[:3000]

    conn = replica.connect()
    try:
        _query(conn, "SET GLOBAL server_id = 7777")  # none of the binlog's server ids
        _query(conn, "STOP SLAVE")
        _query(conn, "RESET SLAVE ALL")
        _query(
            conn,
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, "
            f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}'",
        )
        load = subprocess.run(
            ["mariadb", "-h127.0.0.1", f"-P{replica.port}", "-uroot"],
            input=dump.stdout,
            capture_output=True,
            timeout=300,
        )
        assert load.returncode == 0, load.stderr.decode(errors="replace")
        status = _slave_status(conn)
        if gtid:
            # From the GTID alone: the file/position the dump printed is not used.
            _query(conn, "CHANGE MASTER TO MASTER_USE_GTID=slave_pos")
            with conn.cursor() as cur:
                cur.execute("SELECT @@gtid_slave_pos")
                assert cur.fetchone()[0] == gtid_pos[1]
        else:
            assert (status["Master_Log_File"], status["Read_Master_Log_Pos"]) == (
                position[1],
                int(position[2]),
            )
        _query(conn, "START SLAVE")
        snap.stop_traffic()  # the check compares a still source with the replica
        try:
            report = run_check(snap.config, "127.0.0.1", replica.port, "root", "", timeout=120)
            status = _slave_status(conn)
            assert status.get("Last_SQL_Error", "") == "", status
            assert status.get("Last_IO_Error", "") == "", status
            assert report.equal, report.render()
            tables = {(c.db, c.table) for c in report.tables}
            assert ("bank", "accounts") in tables
            if not gtid:
                assert {("shop", "orders"), ("shop", "customers")} <= tables
        finally:
            _query(conn, "STOP SLAVE")
            snap.start_traffic()
    finally:
        conn.close()
