"""Fixtures of the writer tests: a throwaway MariaDB server (session scope) to apply our files
to. The shared cluster fixture will replace it; until then it is small and self-contained."""

from __future__ import annotations

import shutil

import pytest

from tests.cdc.binlog.throwaway_mariadb import Server, start


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    if not shutil.which("mariadb-install-db"):
        pytest.skip("MariaDB server binaries are not installed")
    server = start(tmp_path_factory.mktemp("mariadb") / "data")
    yield server
    server.stop()
