"""docker-compose.yml's project under traffic (issue 41, "Container facts"): the dumper's
container killed with SIGKILL and started again, `docker compose down` + `up` with the volumes
kept, a fourth DN container added with `cdc cn add-dn`. After each: the replica of the dumper
equals the cluster (`cdc check`) and the global binlog holds every committed transaction exactly
once (`cdc verify-binlog`). One project for the module, torn down at its end even on failure;
the tests run in this order, each on what the one before left."""

from __future__ import annotations

import time

import pytest

from tests.containers.project import Project

DNS4 = "dn1:3306,dn2:3306,dn3:3306,dn4:3306"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    p = Project("cdcct-service", 10, tmp_path_factory.mktemp("compose"))
    try:
        p.up()
        yield p
    finally:
        p.down()


def traffic_for(project: Project, seconds: float) -> int:
    """The workload running for `seconds` more; the global binlog's transactions then."""
    project.run("start", "workload")
    time.sleep(seconds)
    return project.transactions()


def test_whole_system_up(project):
    before = traffic_for(project, 5)
    assert traffic_for(project, 3) > before, "the global binlog does not grow under traffic"
    # The dumper answers as a MySQL server on the project's network.
    events = project.exec(
        "replica",
        "mariadb",
        "-hcdc",
        "-P3307",
        "-urepl",
        "-prepl",
        "-N",
        "-e",
        "SHOW BINLOG EVENTS LIMIT 3",
    )
    assert "Format_desc" in events
    project.check_equal()
    project.verify_binlog()


def test_dumper_killed_and_restarted(project):
    traffic_for(project, 3)
    project.kill("cdc")  # the workload goes on: the CN commits while no dumper runs
    time.sleep(3)
    assert project.inspect("cdc")["State"]["Status"] == "exited"
    project.up("cdc")
    grown = traffic_for(project, 3)
    assert traffic_for(project, 3) > grown
    project.check_equal()
    project.verify_binlog()


def test_down_and_up_keeps_the_volumes(project):
    before = traffic_for(project, 3)
    project.down(volumes=False)
    project.up()
    assert traffic_for(project, 5) > before, "the global binlog started over or did not resume"
    project.check_equal()
    project.verify_binlog()


def test_fourth_dn_added(project):
    traffic_for(project, 2)
    project.up("dn4")
    done = project.tool("cn", "add-dn", dns=DNS4)
    assert done.returncode == 0 and "DN 4 added" in done.stdout, done.stdout + done.stderr
    traffic_for(project, 5)
    status = project.exec("cdc", "cdc", "status")
    assert "dn4" in status, status
    project.check_equal(dns=DNS4)
    # The transfers' total (verify-binlog's "transfer total") holds across the move.
    assert "transfer total (bank.accounts)    ok" in project.verify_binlog()
