"""The supervisor of `cdc start --background` (real child processes): a child that dies is
started again with backoff, a crash loop is flagged in its state (what `cdc status` shows),
a child that exits 0 is not restarted, and a stop ends the child too."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from cdc.pauses import Backoff
from cdc_cli.commands.pipeline import status_lines
from cdc_cli.supervise import CRASH_LOOP, PID_FILE, Supervisor, read_state


def run_in_thread(sup: Supervisor) -> threading.Thread:
    sup.backoff = Backoff(0.01, 0.05)  # (the real one starts at 1 s)
    t = threading.Thread(target=sup.run, daemon=True)
    t.start()
    return t


def wait_for(cond, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_crashes_restart_with_backoff_and_a_loop_is_reported(tmp_path: Path):
    sup = Supervisor([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path)
    t = run_in_thread(sup)
    wait_for(lambda: sup.restarts >= CRASH_LOOP + 1)
    state = read_state(tmp_path)
    assert state is not None and state["crash_loop"] and state["last_exit"]["code"] == 3
    line = status_lines({"written_at": time.time(), "supervisor": state}, time.time())[0]
    assert line.startswith("CRASH LOOP: the service was restarted") and "exit code 3" in line
    sup.stop.set()
    t.join(5)
    assert not t.is_alive()
    assert not (tmp_path / PID_FILE).exists() and read_state(tmp_path) is None


def test_a_clean_exit_is_not_restarted(tmp_path: Path):
    sup = Supervisor([sys.executable, "-c", "pass"], tmp_path)
    t = run_in_thread(sup)
    t.join(10)
    assert not t.is_alive() and sup.restarts == 0


def test_stop_ends_the_child(tmp_path: Path):
    sup = Supervisor([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)
    t = run_in_thread(sup)
    wait_for(lambda: sup.child is not None)
    sup._on_signal(15, None)  # what SIGTERM (`cdc stop`) runs
    t.join(10)
    assert not t.is_alive() and sup.child.returncode == -15 and sup.restarts == 0
