"""Memory settings for the pipeline's processes (a MergeSource worker, the leader, the server).

The collector: they make a few dozen short-lived objects per transaction (fragments,
statements, keys, events), and the default gen-0 threshold (700) ran a collection every few
transactions, re-scanning what survived: a fifth of a MergeSource's CPU in `cdc bench
merge-source`, ~15 % of the leader's steady state. With the objects of start-up frozen (never
scanned again) and a threshold above what one batch keeps alive, collections become rare;
cycles are still collected. (20,000 still left ~5 % of the leader's catch-up CPU in the
collector, `perf`; 100,000: ~2 %.)

The allocator (glibc): their big buffers come and go a batch at a time (256 KB reads of a DN's
dump, frames of hundreds of KB between the processes). glibc serves those from the heap, and
by default gives its top back to the kernel as soon as 2 × the largest such buffer is free
there, so the next batch faulted every page in again, zeroed: every byte read from a DN landed
in a fresh page (34 K page faults over the 3 MergeSource processes of a 1 M-event catch-up, 3 K with
the settings below; ~4 % of its CPU in the kernel's fault path, measured with `perf`). Keeping
up to `TRIM_BYTES` of free heap, and buffers below `MMAP_BYTES` out of mmap, ends that.
"""

from __future__ import annotations

import ctypes
import gc
import logging

log = logging.getLogger(__name__)

# mallopt(3) parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
TRIM_BYTES = 32 << 20  # free heap kept per process at most (its RSS may stay that much higher)
MMAP_BYTES = 8 << 20  # buffers of this size and more still get their own mapping


def tune_memory(keep_heap: bool = True) -> None:
    """Call once the process has imported what it runs (it freezes what exists then).
    `keep_heap=False`: glibc's own trimming stays (the server process, whose RSS is what many
    consumers cost and which reads files, not a socket, a batch at a time)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 20, 100)
    if keep_heap:
        _keep_heap()


def _keep_heap() -> None:
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # not glibc (musl, macOS): its allocator's own policy stays
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_BYTES) and mallopt(M_TRIM_THRESHOLD, TRIM_BYTES)):
        log.debug("mallopt refused the pipeline's settings: glibc's defaults stay")
