"""Fixtures for the reference-CN tests: the shared cluster initialised for the CN (config file
on disk for CLI subprocesses), and a small private cluster for tests that break things."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_asyncio

from cdc.config import Config
from cdc_equipment.cn import ComputeNode, init
from cdc_equipment.local_cluster.testing import throwaway_cluster


def cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cdc_cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=Path(__file__).parents[2],
    )


def with_cn(config: Config, **cn_fields) -> Config:
    return dataclasses.replace(config, cn=dataclasses.replace(config.cn, **cn_fields))


@pytest.fixture(scope="session")
def cn_config(cluster_config, tmp_path_factory) -> Config:
    """The shared cluster, initialised for the CN; `cn_config.cluster.dir`/cn.toml on disk."""
    d = tmp_path_factory.mktemp("cn")
    cfg = with_cn(cluster_config, ground_truth_log=str(d / "ground_truth.jsonl"))
    asyncio.run(init(cfg))
    cfg.dump(d / "cdc.toml")
    return cfg


@pytest.fixture(scope="session")
def cn_config_file(cn_config, tmp_path_factory) -> Path:
    path = Path(cn_config.cn.ground_truth_log).parent / "cdc.toml"
    assert path.exists()
    return path


@pytest_asyncio.fixture(loop_scope="function")
async def cn(cn_config):
    node = ComputeNode(cn_config)
    await node.start(recover=False)
    try:
        yield node
    finally:
        await node.close()


@pytest.fixture(scope="session")
def small_cluster(tmp_path_factory):
    """GMS + 2 DNs of our own, plus DN 3 started up front for the scale-out test (a port picked
    late may meanwhile be some client's ephemeral port): DN kills, GMS restarts, scale-out."""
    c = throwaway_cluster(tmp_path_factory.mktemp("small"), dns=3, spare_dns=1)
    try:
        yield c
    finally:
        c.down()


@pytest.fixture(scope="session")
def small_config(small_cluster, tmp_path_factory) -> Config:
    """The first two DNs only: DN 3 joins through `cdc cn add-dn` in the scale-out test."""
    cfg = small_cluster.config()
    cfg.dn = cfg.dn[:2]
    asyncio.run(init(cfg))
    return cfg


def xa_prepared(config: Config) -> dict[int, list]:
    """Our prepared XA branches per DN (should be empty when the cluster is at rest)."""
    import pymysql

    from cdc.cn_protocol.xid import parse_recover_row

    out = {}
    for node in config.dn:
        conn = pymysql.connect(host=node.host, port=node.port, user=node.user, password="")
        try:
            with conn.cursor() as cur:
                cur.execute("XA RECOVER")
                out[node.id] = [x for x in map(parse_recover_row, cur.fetchall()) if x]
        finally:
            conn.close()
    return out
