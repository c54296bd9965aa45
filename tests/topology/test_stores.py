"""Topology stores on the real GMS: migrations, idempotent history, lookups by TSO."""

from __future__ import annotations

import threading

import pytest

from topology import gms
from topology.checkpoints import Checkpoint, CheckpointStore
from topology.file_index import FileEntry, FileIndex
from topology.migrations import MIGRATIONS, MigrationError, current_version, migrate
from topology.schema_history import SchemaHistory, SchemaRecord
from topology.topology_history import HistoryConflict, TopologyHistory, TopologyRecord


@pytest.fixture
def meta(cluster_config, request):
    """A fresh CDC meta database per test (own name, so tests never see each other's rows)."""
    database = f"cdc_meta_t{abs(hash(request.node.name)) % 10**8}"
    conn = gms.connect(cluster_config.gms)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
    migrate(conn, database)
    yield conn, database
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
    conn.close()


def test_migrations_apply_once_even_concurrently(cluster_config):
    database = "cdc_meta_concurrent"
    conn = gms.connect(cluster_config.gms)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
    results: list[list[int]] = []

    def run():
        c = gms.connect(cluster_config.gms)
        results.append(migrate(c, database))
        c.close()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(tuple, results)) == [(), (), (), tuple(m.version for m in MIGRATIONS)]
    assert current_version(conn, database) == MIGRATIONS[-1].version
    assert migrate(conn, database) == []
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO `{database}`.binlog_schema_version (version, description) "
            "VALUES (99, 'from the future')"
        )
    with pytest.raises(MigrationError, match="newer than this program"):
        migrate(conn, database)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE `{database}`")
    conn.close()


def test_topology_history_is_idempotent_and_answers_by_tso(meta):
    history = TopologyHistory(*meta)
    start = TopologyRecord(100, "CdcStart", "i-1", {"dns": [1, 2], "map": {"a": 1}})
    change = TopologyRecord(200, "StorageChange", "i-2", {"dns": [1, 2, 3], "map": {"a": 1}})
    assert history.record(start) and history.record(change)
    assert not history.record(change)  # replay after a restart: same decision, no new row
    with pytest.raises(HistoryConflict):
        history.record(TopologyRecord(201, "StorageChange", "i-2", {"dns": [9]}))
    assert history.at(99) is None
    assert history.at(100) == start and history.at(199) == start
    assert history.at(10**15) == change
    assert history.all() == [start, change]


def test_schema_history(meta):
    history = SchemaHistory(*meta)
    v1 = SchemaRecord(
        10, "shop", "orders", "CREATE TABLE orders (id INT)", {"columns": ["id"]}, "d-1"
    )
    v2 = SchemaRecord(
        20, "shop", "orders", "ALTER TABLE orders ADD c INT", {"columns": ["id", "c"]}, "d-2"
    )
    assert history.record(v1) and history.record(v2) and not history.record(v2)
    assert history.at("shop", "orders", 5) is None
    assert history.at("shop", "orders", 15) == v1 and history.at("shop", "orders", 20) == v2
    assert history.at("shop", "other", 20) is None


def test_checkpoints_and_file_index(meta):
    cps = CheckpointStore(*meta)
    assert cps.load("dn1") is None
    cps.save(Checkpoint("dn1", "binlog.000001", 4, 0))
    cps.save(Checkpoint("dn1", "binlog.000002", 1234, 77))
    assert cps.load("dn1") == Checkpoint("dn1", "binlog.000002", 1234, 77)

    index = FileIndex(*meta)
    index.upsert(FileEntry("binlog.000001", 100, 150, 1000))
    index.upsert(FileEntry("binlog.000002", 160, None, 200))
    index.upsert(FileEntry("binlog.000002", 999, 180, 400))  # first_tso never moves once set
    assert index.entries()[1] == FileEntry("binlog.000002", 160, 180, 400)
    assert index.file_for(120).file == "binlog.000001"
    assert index.file_for(170).file == "binlog.000002"
    assert index.file_for(50) is None
    index.remove("binlog.000001")
    assert [e.file for e in index.entries()] == ["binlog.000002"]
