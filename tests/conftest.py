"""Session-wide fixtures: ONE local cluster (GMS + 3 DNs) shared by all integration tests.

It lives in its own temp dir on free ports and is torn down at the end, even on failure.
Tests that must break a cluster (kill a DN, add a DN) start their own small one instead.

Under pytest-xdist (`make test`: 2 workers) each worker has its own session cluster; the
scheduler below keeps together what must run in one process.

Disk: a passing test's `tmp_path` is removed as it ends (pyproject's `tmp_path_retention_policy
= "failed"`), and so is the directory a wider fixture made with `tmp_path_factory` (a cluster's
datadirs, a pipeline's binlogs) once it is torn down, as long as no test has failed in this
process: a full run kept ~9 GB of datadirs to its end otherwise. After a failure everything is
kept for debugging.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cdc_equipment.local_cluster import LocalCluster
from cdc_equipment.local_cluster.testing import throwaway_cluster

# Packages whose tests share a package-scoped fixture (a cluster and pipeline of their own):
# one worker runs all of a package's tests, so the fixture starts once.
SHARED_FIXTURE_PACKAGES = ("tests/compat/", "tests/dumper/hostile/", "tests/read_path/")


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


# Work units of about a minute or more (their tests start clusters and processes of their own,
# or a whole pytest run): handed out right after the slow-marked ones, so that the run ends
# with short units on both workers instead of one worker alone on a long one (measured: both
# workers ended within 1 s of each other, 12 s apart before).
LONG_UNITS = (
    "tests/chaos/",
    "tests/e2e/",
    "tests/backfill/",
    "tests/compat/",
    "tests/read_path/",
    "tests/cn/test_kill.py",
    "tests/test_compiled.py",
)


def hand_out_order(item) -> int:
    """0: a unit holding a test marked slow (tests/readme, the longest); 1: a LONG_UNITS one;
    2: the rest."""
    if item.get_closest_marker("slow") is not None:
        return 0
    return 1 if item.nodeid.startswith(LONG_UNITS) else 2


def pytest_collection_modifyitems(config, items):
    """On an xdist worker (which collects; the controller hands out what the first worker
    collected, in that order), the long work units first (`hand_out_order`): tests/readme
    would otherwise start among the last and end the run alone. Alone, pytest's order."""
    if hasattr(config, "workerinput"):  # (a worker's numprocesses is None)
        items.sort(key=hand_out_order)  # stable


class RemoveWhatPassed:
    """Removes the directories a fixture wider than a test made with `tmp_path_factory` once
    it is torn down (its servers stopped), unless a test has failed in this process (kept for
    debugging). A plugin of its own: a conftest's hooks do not see session-scoped fixtures."""

    def __init__(self) -> None:
        self.made: dict[int, list[Path]] = {}  # by id(fixturedef)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        """The base temp dir's new entries while the fixture set up (its dependencies are
        set up before)."""
        if fixturedef.scope == "function" or "tmp_path_factory" not in fixturedef.argnames:
            return (yield)
        base = request.getfixturevalue("tmp_path_factory").getbasetemp()
        before = set(base.iterdir())
        try:
            return (yield)
        finally:
            self.made[id(fixturedef)] = sorted(set(base.iterdir()) - before)

    def pytest_fixture_post_finalizer(self, fixturedef, request):
        made = self.made.pop(id(fixturedef), [])
        if not request.session.testsfailed:
            for path in made:
                shutil.rmtree(path, ignore_errors=True)


def pytest_configure(config):
    config.pluginmanager.register(RemoveWhatPassed(), "remove-what-passed")


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
