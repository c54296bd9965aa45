"""Partition tests run their processes on hosts of their own (cdc_equipment/local_cluster/hosts.py): network
namespaces on one bridge, with faults on the links between them. They need root, `ip`, `tc`
and `nft`, and are skipped otherwise."""

from __future__ import annotations

import pytest

from cdc_equipment.local_cluster.hosts import Hosts, missing

needs_hosts = pytest.mark.skipif(missing() is not None, reason=str(missing()))


@pytest.fixture
def hosts():
    """This test's hosts; every namespace, link and process on them gone after it."""
    with Hosts() as h:
        yield h
