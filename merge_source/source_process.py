"""The leader's handle on a MergeSource running in its own process (`worker.py`).

It looks like an in-process `MergeSource` to the leader (`run`, `status`, `error`, `name`):
`run` has the fork server fork the worker, hands it the `SourceSpec`, and moves the batches it sends onto the
shared queue. It reads the pipe only when the queue has room, so a slow MergeJoint fills the
pipe, the worker blocks on it and stops reading its DN: the same backpressure as in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pickle
import time
from typing import Any

from cdc import stage_trace
from cdc.frames import FRAME, FrameTooLarge, read_body
from merge_source.fork_server import ForkedWorker, ForkServer
from merge_source.fragment import Watermark
from merge_source.source import Batch, SourceSpec
from merge_source.wire import FatalError, Status, decode_body
from merge_source.worker import EXIT_SPILL_FULL

log = logging.getLogger(__name__)

STATUS_STALE_S = 5.0


class SourceFailed(RuntimeError):
    """The MergeSource stopped on an error it cannot get past (the message says which)."""


class SourceProcessDied(RuntimeError):
    """The MergeSource process ended without saying why (killed, crashed): restartable."""


class SpillFull(SourceProcessDied):
    """The MergeSource's spill directory is full: restartable once there is room."""


class SourceProcess:
    def __init__(
        self,
        spec: SourceSpec,
        queue: asyncio.Queue[Batch],
        forks: ForkServer,
    ):
        self.spec = spec
        self.queue = queue
        self._forks = forks
        self.error: BaseException | None = None
        self.pid: int | None = None
        self._status: dict[str, Any] = {"state": "starting"}
        self._status_at = time.monotonic()

    @property
    def dn_id(self) -> int:
        return self.spec.dn_id

    @property
    def name(self) -> str:
        return self.spec.dn_name

    def status(self) -> dict[str, Any]:
        status = dict(self._status)
        age = time.monotonic() - self._status_at
        status["silent_s"] = round(status.get("silent_s", 0.0) + age, 1)
        if age > STATUS_STALE_S and status.get("state") == "up":
            status["state"] = "busy"  # blocked on a full pipe, or stuck: the age says
        status["pid"] = self.pid
        return status

    async def run(self) -> None:
        proc = await self._forks.spawn()
        self.pid = proc.pid
        assert proc.stdin is not None and proc.stdout is not None
        try:
            spec = pickle.dumps((self.spec, logging.getLogger().getEffectiveLevel()))
            proc.stdin.write(FRAME.pack(len(spec)) + spec)
            await proc.stdin.drain()  # stdin stays open: its end tells the worker we are gone
            log.info("%s: MergeSource process %d started", self.name, proc.pid)
            await self._read(proc.stdout)
            rc = await proc.wait()
            if self.error is not None:
                raise self.error
            if rc == EXIT_SPILL_FULL:
                self.error = SpillFull(
                    f"{self.name}: the spill directory {self.spec.spill_dir or '(temp dir)'} "
                    "is full"
                )
                raise self.error
            self.error = SourceProcessDied(
                f"{self.name}: MergeSource process {proc.pid} ended unexpectedly ({_exit(rc)})"
            )
            raise self.error
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if self.error is None:
                self.error = exc
            raise
        finally:
            await _stop(proc)

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        queue = self.queue
        while True:
            try:
                body = await read_body(stdout)
            except FrameTooLarge as exc:
                raise SourceFailed(f"{self.name}: from the MergeSource, {exc}") from None
            if body is None:
                return  # the worker ended: `run` finds out how
            got = time.monotonic()
            batch = decode_body(body)
            if type(batch) is Status:
                self._status, self._status_at = batch, got
                continue
            if type(batch) is FatalError:
                self.error = SourceFailed(str(batch))
                log.error("%s: MergeSource stopped: %s", self.name, batch)
                continue
            if batch:
                if stage_trace.enabled:  # `cdc bench latency`: when each fragment arrived
                    for item in batch:
                        if type(item) is not Watermark:
                            stage_trace.stamp("lrecv", item.key.tso, got)
                await queue.put(batch)


def _exit(rc: int | None) -> str:
    if rc is not None and rc < 0:
        return f"killed by signal {-rc}"
    return f"exit code {rc}"


async def _stop(proc: ForkedWorker) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(proc.wait(), 5)
