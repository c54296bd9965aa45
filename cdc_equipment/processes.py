"""Processes named by identity, not by number: a pid and the kernel's start time of the process.

A pid alone is a number the kernel hands out again once its process is gone (pid_max is 32768
on many machines, a busy host wraps it in minutes). A pid file left by a process that was
SIGKILLed names, some time later, an unrelated process: `cdc stop` would signal it and
`cdc start` would think the pipeline already runs. (pid, start time) is unique for as long as
the machine is up, so signals go only to the process that wrote the file."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None once the process is
    gone: no such pid, or a zombie with no thread left. (A SIGKILLed process's main thread
    turns zombie while its other threads still exit, and they hold its files, a listening
    socket included.)"""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X") and len(os.listdir(f"/proc/{pid}/task")) <= 1:
            return None
    except (OSError, IndexError):
        return None
    return int(fields[19])  # field 22 of stat(5); fields[0] is field 3


def wait_exited(pid: int, start_time: int, timeout: float) -> bool:
    """Wait until the process (`pid`, `start_time`) has exited; False if it is still there."""
    deadline = time.monotonic() + timeout
    while process_start_time(pid) == start_time:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@dataclass(frozen=True, slots=True)
class ProcessId:
    pid: int
    start_time: int

    @classmethod
    def own(cls) -> ProcessId:
        pid = os.getpid()
        return cls(pid, process_start_time(pid) or 0)

    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time


class PidFile:
    """`<pid> <start time>` on one line. `running()` is the process that wrote it while that
    very process lives, else None (the file is stale: its pid may name another process)."""

    def __init__(self, path: Path):
        self.path = path

    def write(self) -> ProcessId:
        me = ProcessId.own()
        self.path.write_text(f"{me.pid} {me.start_time}\n")
        return me

    def running(self) -> ProcessId | None:
        try:
            pid, start_time = (int(f) for f in self.path.read_text().split())
        except (OSError, ValueError):  # absent, or not ours (a bare pid: no identity to check)
            return None
        found = ProcessId(pid, start_time)
        return found if found.alive() else None

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
