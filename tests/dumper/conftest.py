"""Fixtures of the Dumper tests: a served directory of generated MySQL 5.7-flavour binlog files."""

from __future__ import annotations

import pytest

from tests.dumper.binlog_gen import Fixture, write_fixture
from tests.dumper.helpers import ServerThread


@pytest.fixture
def binlogs(tmp_path) -> Fixture:
    return write_fixture(tmp_path / "binlog")


@pytest.fixture
def server(binlogs):
    with ServerThread(binlogs.dir) as s:
        yield s
