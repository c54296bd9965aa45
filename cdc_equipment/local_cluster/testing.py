"""Helpers for test suites: a throw-away cluster on free ports (like asyncpg's cluster module)."""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from cdc_equipment.local_cluster.local_cluster import (
    DEFAULT_BASE_PORT,
    REPLICA_PORT_OFFSET,
    LocalCluster,
)
from cdc_equipment.local_cluster.mariadb_server import port_is_free

# The ports of the clusters the README starts (`make demo` on the default base port, the HA
# example on base + 100), with their dumpers and replicas: a throw-away cluster never takes
# them, so the test suite, the README's commands and a demo can run side by side.
DEFAULT_CLUSTER_PORTS = range(DEFAULT_BASE_PORT, DEFAULT_BASE_PORT + 100 + REPLICA_PORT_OFFSET + 16)


def free_base_port(span: int, low: int = 20000, high: int = 32000, tries: int = 200) -> int:
    """A base port P such that P..P+span are all free right now (below Linux's ephemeral
    range 32768-60999, so a port checked free now is not taken by an outgoing connection
    a moment later), outside the default cluster's ports."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(low, high - span)
        ports = range(base, base + span + 1)
        if ports.start < DEFAULT_CLUSTER_PORTS.stop and DEFAULT_CLUSTER_PORTS.start < ports.stop:
            continue
        if all(port_is_free(p) for p in ports):
            return base
    raise RuntimeError(f"no {span + 1} consecutive free ports found in {low}..{high}")


def throwaway_cluster(directory: Path, dns: int = 3, spare_dns: int = 4) -> LocalCluster:
    """Start GMS + `dns` DNs in `directory`, leaving room for `spare_dns` more (add-dn)."""
    cluster = LocalCluster(directory)
    cluster.up(dns=dns, base_port=free_base_port(dns + spare_dns + 1))
    return cluster


@contextlib.contextmanager
def scratch_cluster(prefix: str, dns: int) -> Iterator[tuple[Path, LocalCluster]]:
    """(a new temp directory, a throw-away cluster in it); on exit the cluster is stopped and
    the directory removed, also when the cluster fails to start (benches)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        cluster = throwaway_cluster(work / "cluster", dns=dns)
        try:
            yield work, cluster
        finally:
            cluster.down()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def throwaway_server(directory: Path, server_id: int = 500, name: str = "replica", host=None):
    """One stand-alone MariaDB server (e.g. a replica of the dumper) on a free port; on
    `host` (a cdc_equipment.local_cluster.hosts.Host: in its namespace, on its address) when given."""
    from cdc_equipment.local_cluster.mariadb_server import MariadbServer, install_datadir

    server = MariadbServer(name, "replica", Path(directory) / name, free_base_port(0), server_id)
    if host is not None:
        server.host, server.netns = host.address, host.netns
    server.write_config()
    if not server.datadir.exists():
        install_datadir(server.datadir, server.home / "install-db.log")
    server.start()
    return server


def stop_process(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM a process we started (e.g. `cdc start`), SIGKILL it after `grace_s`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
