"""Per-stage timestamps of transactions, for `cdc bench latency` (off unless the environment
variable `CDC_STAGE_TRACE` names a directory).

Each process appends `stage<TAB>value<TAB>monotonic` lines to its own file there (monotonic
time is one clock for every process on Linux): the stages a transaction passes (by commit
TSO), and the pauses of the process's event loop with what the main thread did meanwhile
(`/proc/self/schedstat`: running → Python work such as a GC; waiting for a CPU → starved;
neither → blocked in a system call such as an fsync). The bench reads them back
(`bench/latency.py`). Disabled, `stamp` costs one global lookup and a test.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from pathlib import Path

ENV = "CDC_STAGE_TRACE"
FLUSH_S = 0.25
LAG_TICK_S = 0.01
LAG_REPORT_S = 0.02  # loop pauses above this are recorded
GC_REPORT_S = 0.005  # collections above this are recorded

enabled = bool(os.environ.get(ENV))
_rows: list[str] = []
_file = None
_flushed_at = 0.0


def stamp(stage: str, value: int, at: float | None = None) -> None:
    if not enabled:
        return
    global _flushed_at
    now = time.monotonic()
    _rows.append(f"{stage}\t{value}\t{now if at is None else at:.6f}\n")
    if now - _flushed_at > FLUSH_S:
        flush()
        _flushed_at = now


def flush() -> None:
    if _file is not None and _rows:
        _file.write("".join(_rows))
        _file.flush()
        _rows.clear()


def _schedstat(fd: int) -> tuple[int, int]:
    """(ns on a CPU, ns runnable waiting for one) of the thread that opened `fd`."""
    try:
        run, wait, _ = os.pread(fd, 128, 0).split()
        return int(run), int(wait)
    except (OSError, ValueError):
        return 0, 0


async def _watch_loop() -> None:
    # Opened here, in the event loop's thread; kept open (a tick reads it, opening costs more).
    fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
    try:
        while True:
            t0 = time.monotonic()
            run0, wait0 = _schedstat(fd)
            await asyncio.sleep(LAG_TICK_S)
            lag = time.monotonic() - t0 - LAG_TICK_S
            if lag > LAG_REPORT_S:
                _report(lag, t0, run0, wait0, *_schedstat(fd))
    finally:
        os.close(fd)


def _report(lag: float, t0: float, run0: int, wait0: int, run1: int, wait1: int) -> None:
    """A pause in us, and what the thread did meanwhile, as three rows at the same time."""
    stamp("lag", int(lag * 1e6), t0)
    stamp("lag_run", (run1 - run0) // 1000, t0)
    stamp("lag_wait", (wait1 - wait0) // 1000, t0)


_gc_start = 0.0


def _on_gc(phase: str, info: dict) -> None:
    global _gc_start
    if phase == "start":
        _gc_start = time.monotonic()
    else:
        took = time.monotonic() - _gc_start
        if took > GC_REPORT_S:
            stamp(f"gc{info.get('generation', 0)}", int(took * 1e6), _gc_start)


def start(name: str) -> asyncio.Task | None:
    """Open this process's trace file and watch its event loop and GC (call it from inside the
    running loop; keep the task). None when tracing is off."""
    global _file, enabled
    enabled = bool(os.environ.get(ENV))
    if not enabled:
        return None
    if _file is None:
        _file = open(Path(os.environ[ENV]) / f"{name}-{os.getpid()}.tsv", "a")  # noqa: SIM115
        gc.callbacks.append(_on_gc)
    return asyncio.create_task(_watch_loop(), name="stage-trace")
