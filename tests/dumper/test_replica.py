"""A real MariaDB 10.11 replica replicates the served files: two files, DDL and rows, heartbeats
while idle, growth of the active file, a Dumper restart (reconnect mid-file) and a rotation."""

from __future__ import annotations

import pytest

from cdc_equipment.local_cluster.mariadb_server import port_is_free
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from tests.dumper.binlog_gen import T1, FileBuilder, write_fixture
from tests.dumper.helpers import PASSWORD, USER, ServerThread, wait_for


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    cluster = throwaway_cluster(tmp_path_factory.mktemp("replica"), dns=1, spare_dns=0)
    try:
        yield cluster.dn(1)
    finally:
        cluster.down()


def _query(conn, sql: str):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def _slave_status(conn) -> dict:
    import pymysql.cursors

    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW SLAVE STATUS")
        return cur.fetchone() or {}


def _table(conn) -> dict:
    try:
        return dict(_query(conn, "SELECT id, name FROM gbl.t1"))
    except Exception:
        return {}


def _heartbeats(conn) -> int:
    rows = _query(conn, "SHOW GLOBAL STATUS LIKE 'Slave_received_heartbeats'")
    return int(rows[0][1]) if rows else 0


def test_mariadb_replica_follows_files_heartbeats_restart_rotation(tmp_path, replica):
    fx = write_fixture(tmp_path / "binlog")
    port = free_base_port(0)
    srv = ServerThread(fx.dir, port=port)
    conn = replica.connect()
    try:
        _query(conn, "STOP SLAVE")
        _query(conn, "RESET SLAVE ALL")
        _query(
            conn,
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, "
            f"MASTER_USER='{USER}', MASTER_PASSWORD='{PASSWORD}', "
            "MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, MASTER_USE_GTID=no, "
            "MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1",
        )
        _query(conn, "START SLAVE")
        wait_for(lambda: _table(conn) == fx.expected, 20, "replicated table")
        st = _slave_status(conn)
        assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes"), st
        assert st["Last_IO_Error"] == "" and st["Last_SQL_Error"] == ""
        assert st["Master_Log_File"] == "binlog.000002"

        # Idle: heartbeats arrive (period 1 s) and do not upset the IO thread.
        before = _heartbeats(conn)
        wait_for(lambda: _heartbeats(conn) >= before + 2, 10, "heartbeats")

        # The registration is visible on the Dumper.
        hosts = srv.call(_show_slave_hosts(srv))
        assert replica.server_id in hosts

        # Growth of the active file reaches the replica (writer notification).
        fx.active.txn(T1, 6, insert=[(5, "e")])
        fx.active.flush(fx.dir / "binlog.000002")
        srv.notify()
        wait_for(lambda: _table(conn).get(5) == "e", 10, "appended row")

        # Restart the Dumper on the same port: the replica reconnects mid-file.
        srv.stop()
        wait_for(lambda: port_is_free(port), 10, "port released")
        fx.active.txn(T1, 7, insert=[(6, "f")])
        fx.active.flush(fx.dir / "binlog.000002")
        srv = ServerThread(fx.dir, port=port)
        wait_for(lambda: _table(conn).get(6) == "f", 20, "row after restart")

        # Rotation to a third file while connected.
        fx.active.rotate("binlog.000003")
        fx.active.flush(fx.dir / "binlog.000002")
        f3 = FileBuilder(in_use=True)
        f3.txn(T1, 8, insert=[(7, "g")])
        f3.flush(fx.dir / "binlog.000003")
        with open(fx.dir / "binlog.index", "a") as f:
            f.write("./binlog.000003\n")
        srv.notify()
        wait_for(lambda: _table(conn).get(7) == "g", 20, "row in the third file")
        st = _slave_status(conn)
        assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes"), st
        assert st["Master_Log_File"] == "binlog.000003"
        assert st["Read_Master_Log_Pos"] == (fx.dir / "binlog.000003").stat().st_size
        assert _table(conn) == {**fx.expected, 5: "e", 6: "f", 7: "g"}
        before = _heartbeats(conn)
        wait_for(lambda: _heartbeats(conn) >= before + 1, 10, "heartbeats after rotation")
        assert _slave_status(conn)["Last_IO_Error"] == ""
    finally:
        _query(conn, "STOP SLAVE")
        _query(conn, "RESET SLAVE ALL")
        conn.close()
        srv.stop()


async def _show_slave_hosts(srv: ServerThread) -> list[int]:
    return [r.server_id for r in srv.server.dump.replicas.values()]
