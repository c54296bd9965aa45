"""A MergeSource in its own process, forked by the fork server (`fork_server.py`), so that
reading and sorting each DN's binlog runs beside MergeJoint and the writer instead of sharing
one GIL.

stdin: one frame with the pickled `SourceSpec` (from the leader, which asked for us), then
nothing; its end means the leader is gone, and so are we. stdout: `wire` frames (the contract is
`frames.proto`: batches, a status every `STATUS_INTERVAL_S`, and a last fatal error if the
source fails). Logs go to stderr, which the leader's process shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import pickle
import signal
import sys
import time

from cdc import stage_trace
from cdc.frames import FRAME
from cdc.memory_tune import tune_memory
from cdc.pauses import is_disk_full
from cdc.tasks import cancel_and_wait
from merge_source.source import Batch, MergeSource, SourceSpec
from merge_source.wire import collapse_watermarks, encode_batch, encode_error, encode_status

log = logging.getLogger(__name__)

STATUS_INTERVAL_S = 0.5
FRAME_BATCHES = 16  # source batches waiting in the queue that go out as one frame
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
EXIT_SOURCE_FAILED = 2
# The exit code when the spill directory is full: the leader (source_process.py) waits for room
# and restarts the pipeline (a pause, docs/faults.md), where any other error of the source stops
# it.
EXIT_SPILL_FULL = 3


def name_process(name: bytes) -> None:
    """The process's name as `ps -o comm`, `top` and `pgrep` show it (15 bytes at most): a
    fork server forked from `cdc start` and its workers carry its command line, not their own."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(name[:15]))


def die_with_parent(parent: int) -> None:
    """SIGKILL us when `parent` (the leader, or the fork server) dies, even mid-write (stdin
    EOF covers the rest)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)  # it died before the prctl


async def _pipe_streams() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout.buffer
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


async def _send(source: MergeSource, queue: asyncio.Queue[Batch], out, spill_dir) -> None:
    last_status = 0.0
    while True:
        frames = []
        try:
            async with asyncio.timeout(STATUS_INTERVAL_S):  # not wait_for: see dump_client
                items = list(await queue.get())
            n = 1
            while not queue.empty() and n < FRAME_BATCHES:  # fewer, larger frames
                items += queue.get_nowait()
                n += 1
            frames.append(encode_batch(collapse_watermarks(items), spill_dir))
        except TimeoutError:
            pass
        now = time.monotonic()
        if now - last_status >= STATUS_INTERVAL_S:
            frames.append(encode_status(source.status()))
            last_status = now
        out.write(b"".join(frames))
        await out.drain()  # the pipe is full: MergeJoint is behind, stop reading the DN


async def serve(spec: SourceSpec) -> int:
    stdin, out = await _pipe_streams()
    trace = stage_trace.start(f"source-{spec.dn_name}")  # noqa: F841 (kept alive)
    queue: asyncio.Queue[Batch] = asyncio.Queue(maxsize=8)
    source = MergeSource.from_spec(spec, queue)
    source.packed = True  # its statements cross the pipe, never reach a merge as lists here
    run = asyncio.create_task(source.run(), name="source")
    send = asyncio.create_task(_send(source, queue, out, spec.spill_dir), name="send")
    leader_gone = asyncio.create_task(stdin.read(), name="stdin")
    tasks = [run, send, leader_gone]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if leader_gone in done:
            return 0
        failed = next(t for t in done)
        exc = failed.exception() or RuntimeError(f"{failed.get_name()} stopped")
        if _disk_full(exc):
            log.warning("spill directory %s full: %s", spec.spill_dir or "(temp dir)", exc)
            return EXIT_SPILL_FULL
        if failed is run:
            out.write(encode_error(str(exc)))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(out.drain(), 5)
            return EXIT_SOURCE_FAILED
        raise exc
    finally:
        await cancel_and_wait(tasks)


def _disk_full(exc: BaseException | None) -> bool:
    """`exc` or what it was raised from is a full disk (the spill's writes)."""
    while exc is not None:
        if is_disk_full(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def main(parent: int) -> int:
    """`parent`: the process we must die with (the fork server, which dies with the leader)."""
    raw = sys.stdin.buffer.read(FRAME.size)
    if len(raw) < FRAME.size:
        return 0  # the leader gave up on us before sending the spec
    (n,) = FRAME.unpack(raw)
    spec, level = pickle.loads(sys.stdin.buffer.read(n))
    die_with_parent(parent)
    tune_memory()
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s %(levelname)s [source {spec.dn_name} pid {os.getpid()}] %(message)s",
        stream=sys.stderr,
    )
    return asyncio.run(serve(spec))
