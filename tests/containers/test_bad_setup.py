"""A wrong setup fails at start, saying what is wrong, and the container stays stopped: no
restart loop (issue 41, item 7). A missing configuration, a DN that writes no binlog, a port
already taken on the host."""

from __future__ import annotations

import socket
import time

import pytest
from testcontainers.core.container import DockerContainer

from tests.containers.project import LABEL, Project


def test_missing_configuration_names_what_to_mount_or_set():
    container = DockerContainer("cdc:dev").with_kwargs(labels=dict([LABEL.split("=")]))
    container.start()
    try:
        wrapped = container.get_wrapped_container()
        exit_code = wrapped.wait(timeout=60)["StatusCode"]
        logs = wrapped.logs().decode()
        wrapped.reload()
        assert exit_code == 2, logs
        assert "no configuration" in logs and "/etc/cdc/cdc.toml" in logs and "CDC_GMS" in logs
        assert wrapped.attrs["RestartCount"] == 0
    finally:
        container.stop()


@pytest.fixture
def no_binlog_on_dn2(tmp_path):
    p = Project("cdcct-nobinlog", 12, tmp_path, env={"CDC_DN2_LOG_BIN": "OFF"})
    try:
        yield p
    finally:
        p.down()


def test_dn_without_binlog_refused_by_name(no_binlog_on_dn2):
    p = no_binlog_on_dn2
    # (compose's `--wait` names the exit, "container …-cdc-1 exited (2)", but its own status
    # stays 0 on this engine: the container's state is what is checked)
    done = p.run("up", "-d", "--wait", "cdc", check=False, timeout=600)
    assert "exited (2)" in done.stdout + done.stderr, done.stdout + done.stderr
    time.sleep(3)  # a restart policy would have started it again by now
    state = p.inspect("cdc")["State"]
    logs = p.logs("cdc")
    assert state["Status"] == "exited" and state["ExitCode"] == 2, logs
    assert "refusing to start" in logs and "dn2" in logs and "log_bin" in logs, logs
    assert p.inspect("cdc")["RestartCount"] == 0


@pytest.fixture
def taken_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = Project("cdcct-port", 13, tmp_path, env={"CDC_GMS_PORT": str(port)})
        try:
            yield p, port
        finally:
            p.down()


def test_port_taken_named(taken_port):
    p, port = taken_port
    done = p.run("up", "-d", "gms", check=False, timeout=300)
    assert f"127.0.0.1:{port}" in done.stderr and "already in use" in done.stderr, done.stderr
    time.sleep(3)
    state = p.inspect("gms")["State"]
    assert state["Status"] != "running" and p.inspect("gms")["RestartCount"] == 0, state
