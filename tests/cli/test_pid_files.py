"""`cdc stop` / `cdc start` / `cdc status` and a pid file left by a process that was SIGKILLed,
whose pid now names another process (pids wrap: pid_max is often 32768). A stale file once
made `cdc stop` SIGTERM whatever held the number (a DN of another cluster, in CI) and
`cdc start` answer "already running". Real processes: the CLI, and a `sleep` as the stranger."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdc_equipment.processes import PidFile, ProcessId, process_start_time

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stranger():
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def cdc(tmp_path: Path, *args: str, rc: int = 0) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "cdc_cli.main", *args, "--config", str(tmp_path / "cdc.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == rc, res.stderr
    return res.stdout


@pytest.mark.parametrize("content", ["{pid} {wrong_start}", "{pid}"], ids=["reused", "bare-pid"])
def test_a_stale_pid_file_naming_another_process_is_not_signalled(tmp_path, stranger, content):
    (tmp_path / "cdc.toml").write_text('[dumper]\nbinlog_dir = "var/binlog"\n')
    state = tmp_path / "var" / "pipeline"
    state.mkdir(parents=True)
    start = process_start_time(stranger.pid)
    for name in ("pipeline.pid", "supervisor.pid"):
        (state / name).write_text(content.format(pid=stranger.pid, wrong_start=start - 1))
    assert PidFile(state / "pipeline.pid").running() is None
    assert cdc(tmp_path, "stop").strip() == "not running"
    assert cdc(tmp_path, "status", rc=1).strip() == "not running"
    assert stranger.poll() is None  # not signalled


def test_a_pid_file_names_its_writer_while_it_lives(tmp_path):
    file = PidFile(tmp_path / "x.pid")
    me = file.write()
    assert me == ProcessId.own() and me.pid == os.getpid() and file.running() == me
    file.remove()
    assert file.running() is None
