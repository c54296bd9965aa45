"""The container tests (`make test-containers`; marker `containers`): the images and
docker-compose.yml under a real Docker engine, each project torn down even when a test fails.
Without an engine or the images they skip, saying which is missing; with
CDC_REQUIRE_CONTAINERS=1 (.ci/run) that is a failure."""

from __future__ import annotations

import os

import pytest

from tests.containers.project import environment_or_skip

# testcontainers' reaper (Ryuk) is an image from Docker Hub, which CI's machines cannot pull: the
# fixtures tear their projects down themselves (`finally`), and leftovers.py finds any left.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/containers/" in item.nodeid:
            item.add_marker(pytest.mark.containers)


@pytest.fixture(scope="session", autouse=True)
def docker_engine():
    environment_or_skip(pytest)
