"""Session-wide fixtures: ONE local cluster (GMS + 3 DNs) shared by all integration tests.

It lives in its own temp dir on free ports and is torn down at the end, even on failure.
Tests that must break a cluster (kill a DN, add a DN) start their own small one instead.

Under pytest-xdist (`make test TEST_WORKERS=2`) each worker has its own session cluster; the
scheduler below keeps together what must run in one process.
"""

from __future__ import annotations

import pytest

from local_cluster import LocalCluster
from local_cluster.testing import throwaway_cluster

# Packages whose tests share a package-scoped fixture (a cluster and pipeline of their own):
# one worker runs all of a package's tests, so the fixture starts once.
SHARED_FIXTURE_PACKAGES = ("tests/compat/", "tests/dumper/hostile/", "tests/dumper/snapshot/")


def work_unit(nodeid: str) -> str:
    """What one xdist worker runs from start to end: a test file (its tests in order, module
    fixtures started once, tests/readme's commands one after the other), or a whole package of
    SHARED_FIXTURE_PACKAGES."""
    path = nodeid.split("::", 1)[0]
    return next((p for p in SHARED_FIXTURE_PACKAGES if path.startswith(p)), path)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: pytest -p no:xdist runs without it
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist workers are handed whole work units, in collection order (`--dist loadgroup`
    cannot group here: pytest 9 ignores the node id suffix it relies on)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # (it would order them by their number of tests)

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


def pytest_collection_modifyitems(config, items):
    """Under xdist, the work units holding a test marked slow first (no long one starts when
    the other worker is nearly done); alone, pytest's order."""
    if getattr(config.option, "numprocesses", None):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable


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
