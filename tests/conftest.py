"""Session-wide fixtures: ONE local cluster (GMS + 3 DNs) shared by all integration tests.

It lives in its own temp dir on free ports and is torn down at the end, even on failure.
Tests that must break a cluster (kill a DN, add a DN) start their own small one instead.
"""

from __future__ import annotations

import pytest

from local_cluster import LocalCluster
from local_cluster.testing import throwaway_cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> LocalCluster:
    c = throwaway_cluster(tmp_path_factory.mktemp("cluster"), dns=3)
    try:
        yield c
    finally:
        c.down()


@pytest.fixture(scope="session")
def cluster_config(cluster):
    return cluster.config()
