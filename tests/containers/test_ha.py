"""Two dumper containers of one HA group under traffic (deploy/docker/compose.ha.yml): the
leader's container killed (SIGKILL), the other takes the lease and leads, and the replica,
re-pointed to it at the file:position it had executed, ends equal to the cluster."""

from __future__ import annotations

import json
import time

import pytest

from tests.containers.project import HA_FILE, Project


@pytest.fixture
def project(tmp_path):
    p = Project("cdcct-ha", 11, tmp_path, extra=(HA_FILE,))
    try:
        p.up()
        yield p
    finally:
        p.down()


def role(project: Project, service: str, dumper_id: int) -> str:
    done = project.run(
        "exec", "-T", service, "cdc", "status", "--json", "--dumper-id", str(dumper_id), check=False
    )
    try:
        return json.loads(done.stdout).get("ha", {}).get("role", "")
    except ValueError:
        return ""


def test_leader_killed_the_other_leads_and_the_replica_follows_it(project):
    assert role(project, "cdc", 1) == "leader"
    assert role(project, "cdc2", 2) == "follower"
    time.sleep(5)  # traffic
    before = project.transactions("cdc2")
    project.kill("cdc")
    deadline = time.monotonic() + 90
    while role(project, "cdc2", 2) != "leader":
        assert time.monotonic() < deadline, project.logs("cdc2")
        time.sleep(1)
    # The replica lost its source: re-pointed to the new leader where it stopped executing.
    status = project.exec("replica", "mariadb", "-uroot", "-e", "SHOW SLAVE STATUS\\G")
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in status.splitlines())}
    file, pos = fields["Relay_Master_Log_File"], fields["Exec_Master_Log_Pos"]
    project.sql(
        "replica",
        "STOP SLAVE; CHANGE MASTER TO MASTER_HOST='cdc2', MASTER_PORT=3307, "
        f"MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}; START SLAVE",
    )
    time.sleep(5)  # traffic through the new leader
    assert project.transactions("cdc2") > before
    project.check_equal(via=None)  # (cdc's container is dead)
    project.verify_binlog("cdc2")
