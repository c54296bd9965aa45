"""`cdc cluster up|status|down|add-dn` through the real CLI, on a cluster of its own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from cdc.config import load
from cdc_equipment.local_cluster import LocalCluster
from cdc_equipment.local_cluster.local_cluster import GMS_SERVER_ID, ClusterError, NodeSpec
from cdc_equipment.local_cluster.testing import free_base_port
from cdc_equipment.processes import process_start_time, wait_exited


def cdc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cdc_cli.main", *args], capture_output=True, text=True, timeout=180
    )


def status_rows(directory) -> dict[str, list[str]]:
    res = cdc("cluster", "status", "--dir", str(directory))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].split()[:5] == ["NODE", "ROLE", "PORT", "PID", "STATE"]
    return {line.split()[0]: line.split() for line in lines[1:]}


def test_up_status_idempotent_kill_add_down(tmp_path):
    base = free_base_port(8)
    res = cdc("cluster", "up", "--dns", "3", "--dir", str(tmp_path), "--base-port", str(base))
    assert res.returncode == 0, res.stderr
    try:
        rows = status_rows(tmp_path)
        assert sorted(rows) == ["dn1", "dn2", "dn3", "gms"]
        for row in rows.values():
            assert row[4] == "up", row
            assert row[5:7] == ["ON", "ROW"], row
            assert row[7].startswith("binlog."), row
        pids = {name: row[3] for name, row in rows.items()}

        cfg = load(tmp_path / "cdc.toml")
        assert cfg.gms.port == base and [d.port for d in cfg.dn] == [base + 1, base + 2, base + 3]
        assert len({d.server_id for d in cfg.dn} | {cfg.gms.server_id}) == 4

        # Idempotent: a second `up` reuses the running servers.
        assert cdc("cluster", "up", "--dns", "3", "--dir", str(tmp_path)).returncode == 0
        assert {n: r[3] for n, r in status_rows(tmp_path).items()} == pids

        # A DN killed with SIGKILL shows as down; `up` brings it back with its data.
        dn2_pid = int(pids["dn2"])
        dn2_started = process_start_time(dn2_pid)
        os.kill(dn2_pid, signal.SIGKILL)
        assert wait_exited(dn2_pid, dn2_started, 30)
        rows = status_rows(tmp_path)
        assert rows["dn2"][4] == "down" and rows["dn1"][4] == "up"
        assert cdc("cluster", "up", "--dir", str(tmp_path)).returncode == 0
        assert status_rows(tmp_path)["dn2"][4] == "up"

        res = cdc("cluster", "add-dn", "--dir", str(tmp_path))
        assert res.returncode == 0, res.stderr
        rows = status_rows(tmp_path)
        assert rows["dn4"][4] == "up" and rows["dn4"][2] == str(base + 4)
        assert [d.id for d in load(tmp_path / "cdc.toml").dn] == [1, 2, 3, 4]
        all_pids = [int(r[3]) for r in rows.values()]
    finally:
        res = cdc("cluster", "down", "--dir", str(tmp_path))
    assert res.returncode == 0, res.stderr
    cluster = LocalCluster(tmp_path)
    assert not any(s.is_running() for s in cluster.servers())
    for pid in all_pids:
        assert not _alive_mariadbd(pid)
    assert all(r[4] == "down" for r in status_rows(tmp_path).values())


def _alive_mariadbd(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("dns", ["0", "-2", "x"])
def test_bad_dns_count(tmp_path, dns):
    res = cdc("cluster", "up", "--dns", dns, "--dir", str(tmp_path))
    assert res.returncode != 0
    assert "--dns" in res.stderr and len(res.stderr.strip().splitlines()) <= 3
    assert not (tmp_path / "cluster.json").exists()


def test_port_in_use(tmp_path):
    base = free_base_port(4)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 2))
        busy.listen()
        res = cdc("cluster", "up", "--dns", "3", "--dir", str(tmp_path), "--base-port", str(base))
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "already in use" in lines[0] and str(base + 2) in lines[0], (
        res.stderr
    )
    assert not LocalCluster(tmp_path).exists


def test_dumper_peers_with_streams_get_a_port_range_each(tmp_path):
    """`cdc cluster up --dumpers 2 --streams 2` (the layout only, no server started): each
    dumper peer takes its port and one per stream after it, so the peers' stream ports never
    meet; a layout that would reach the replicas' ports is refused before anything starts."""
    cluster = LocalCluster(tmp_path)
    cluster.nodes = [NodeSpec("gms", "gms", 23400, GMS_SERVER_ID)]
    cluster.dumpers, cluster.streams = 2, 2
    cfg = cluster.config()
    assert cfg.dumper.streams == 2
    assert [p.port for p in cfg.dumper.peers] == [23450, 23453]  # streams 23451-2, 23454-5
    cfg.dump(tmp_path / "cdc.toml")
    assert load(tmp_path / "cdc.toml").for_dumper(2).dumper.port == 23453
    with pytest.raises(ClusterError, match="need 12 ports"):
        LocalCluster(tmp_path / "other").up(dumpers=3, streams=3)
    assert not (tmp_path / "other" / "cluster.json").exists()


def test_status_without_cluster(tmp_path):
    res = cdc("cluster", "status", "--dir", str(tmp_path))
    assert res.returncode == 1 and "no cluster" in res.stdout


def test_shared_cluster_fixture(cluster):
    for server in cluster.servers():
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT @@log_bin, @@binlog_format, @@binlog_row_metadata, @@character_set_server"
            )
            assert cur.fetchone() == (1, "ROW", "FULL", "utf8mb4")


def test_wait_exited_sees_a_killed_process_go():
    """A SIGKILLed process is gone for `wait_exited` once it no longer exists or is a zombie
    (unreaped here on purpose): by then the kernel has closed its files and sockets."""
    proc = subprocess.Popen(["sleep", "60"])
    started = process_start_time(proc.pid)
    assert started is not None
    assert not wait_exited(proc.pid, started, 0.1)
    os.kill(proc.pid, signal.SIGKILL)
    assert wait_exited(proc.pid, started, 10)
    proc.wait()


def test_a_killed_server_restarts_at_once(tmp_path):
    """`kill()` returns only once the server's port is free: a `start()` right after never
    finds it in use (tests/cn/test_failures.py did, under load)."""
    from cdc_equipment.local_cluster.testing import throwaway_server

    server = throwaway_server(tmp_path)
    try:
        for _ in range(3):
            pid = server.pid()
            server.kill()
            assert server.start() != pid
            server.connect().close()
    finally:
        server.stop()
    assert server.pid() is None


def test_cluster_json_names_a_host_only_for_a_node_placed_on_one():
    """cluster.json is as before for a node on 127.0.0.1; a node on a host of its own
    (cdc_equipment/local_cluster/hosts.py) keeps its address and namespace."""
    assert NodeSpec("gms", "gms", 23400, GMS_SERVER_ID).saved() == {
        "name": "gms",
        "role": "gms",
        "port": 23400,
        "server_id": GMS_SERVER_ID,
        "dn_id": 0,
    }
    placed = NodeSpec("dn1", "dn", 23401, 1, 1, host="10.210.0.3", netns="cdch1n0-dn1")
    assert NodeSpec(**placed.saved()) == placed
