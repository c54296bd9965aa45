"""`cdc start --background`: a supervisor process that runs the service (`cdc start` in the
foreground) as its child and starts it again when it dies, with backoff, so that a crash of the
leader process does not stop the global binlog until someone notices (docs/faults.md).

Each crash is one log line (in `pipeline.log`, with the child's exit); crashes come close
together (`CRASH_LOOP` within `CRASH_WINDOW_S`) are a crash loop, said in the log and by
`cdc status`, never hidden: the supervisor keeps trying at the longest backoff. The state is a
JSON file next to the status file (`supervisor.json`), `supervisor.pid` names the process
`cdc stop` signals: it stops the child (SIGTERM) and ends. A child that exits 0 was stopped
on purpose (SIGTERM from someone else): not restarted."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from cdc.files import write_atomically
from cdc.pauses import Backoff
from cdc_equipment.processes import PidFile

log = logging.getLogger("cdc.supervisor")

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 60.0
STABLE_S = 60.0  # a child that ran this long starts the backoff over
CRASH_LOOP = 5
CRASH_WINDOW_S = 300.0
STATE_FILE = "supervisor.json"
PID_FILE = "supervisor.pid"


class Supervisor:
    def __init__(self, command: list[str], directory: Path):
        self.command = command
        self.dir = directory
        self.stop = threading.Event()
        self.child: subprocess.Popen | None = None
        self.restarts = 0
        self.crashes: deque[float] = deque()
        self.last_exit: dict | None = None
        self.crash_loop = False
        self.backoff = Backoff(FIRST_DELAY_S, MAX_DELAY_S)

    def _on_signal(self, signum: int, _frame) -> None:
        self.stop.set()
        child = self.child
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    def _save(self, **extra) -> None:
        state = {
            "pid": os.getpid(),
            "child_pid": self.child.pid if self.child is not None else None,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "crash_loop": self.crash_loop,
            "recent_crashes": len(self.crashes),
            **extra,
        }
        try:
            write_atomically(self.dir / STATE_FILE, json.dumps(state))
        except OSError as exc:  # a full disk: the log still says it
            log.debug("supervisor state not written: %s", exc)

    def run(self) -> int:
        if threading.current_thread() is threading.main_thread():  # (tests run it in a thread)
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._on_signal)
        PidFile(self.dir / PID_FILE).write()
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                self.child = subprocess.Popen(self.command, stdin=subprocess.DEVNULL)
                self._save(next_start_at=None)
                rc = self.child.wait()
                if self.stop.is_set():
                    break
                if rc == 0:
                    log.info("the service (pid %d) exited cleanly: not restarted", self.child.pid)
                    break
                self._crashed(rc, time.monotonic() - started)
            return 0
        finally:
            PidFile(self.dir / PID_FILE).remove()
            (self.dir / STATE_FILE).unlink(missing_ok=True)

    def _crashed(self, rc: int, ran_s: float) -> None:
        now = time.monotonic()
        self.crashes.append(now)
        while self.crashes and self.crashes[0] < now - CRASH_WINDOW_S:
            self.crashes.popleft()
        if ran_s >= STABLE_S:
            self.backoff.reset()
        delay = self.backoff.next()
        how = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        self.last_exit = {"code": rc, "how": how, "at": time.time(), "ran_s": round(ran_s, 1)}
        loop = len(self.crashes) >= CRASH_LOOP
        if loop:
            log.error(
                "CRASH LOOP: the service died %d times within %.0fs (last: %s after %.1fs); "
                "starting it again in %.0fs - see the lines above",
                len(self.crashes),
                CRASH_WINDOW_S,
                how,
                ran_s,
                delay,
            )
        else:
            log.warning(
                "the service died (%s after %.1fs); starting it again in %.0fs", how, ran_s, delay
            )
        self.crash_loop = loop
        self.restarts += 1
        self._save(next_start_at=time.time() + delay)
        self.stop.wait(delay)


def supervise(command: list[str], directory: Path) -> int:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return Supervisor(command, directory).run()


def read_state(directory: Path) -> dict | None:
    """The supervisor's state file (None: not supervised, or not running)."""
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    running = PidFile(directory / PID_FILE).running()
    return state if running is not None and running.pid == state.get("pid") else None
