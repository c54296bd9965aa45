"""The MySQL protocol server in its own process (docs/dumper.md, "Serving cannot stall writing").

The leader's loop runs MergeJoint and the writer; clients of the protocol server (a heartbeat
flood, a 16 MB query, SHOW BINLOG EVENTS of a 512 MB file, a reader that stopped) must not take
its turns. So `cdc start` runs the server (sessions, SQL, dump senders) in a child process that
reads the binlog files from disk, as the sender always did, and learns from the leader only:

* **how far it may serve** — a tiny shared file, unlinked at once and passed by fd (`ServeState`
  in serve_state.py,
  a seqlock'd struct in an mmap):
  the writer's file number and the end of its last whole transaction, written by the leader
  *after* each batch reached the file, so the child never sends what the leader has not
  published (a huge transaction streamed in parts stays invisible until its end, as
  `BinlogWriter.visible_end` says in process); whether this process leads (the ack gate's
  `active`, PURGE's read-only) and the term (a new term resets the gate);
* **when to look** — one byte on a non-blocking pipe after each publication (a wake-up, like an
  eventfd: when the pipe is full a wake-up is pending anyway, so the leader never blocks on it).

Followers' acknowledgements arrive on the child's sessions and bound what it serves there (the
`AckGate` lives in the child); the child reports them, its consumers (`consumers.py`) and its
retention's purges to the leader twice a second, one JSON line on its stdout, for `cdc status`
and the metrics (`AckGate.report` / `load_report`, `ServeProcess.consumers`). The child ends when its stdin closes (the
leader is gone) or on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from binlog_writer import file_number
from cdc.config import Config
from cdc.memory_tune import tune_memory
from cdc.tasks import cancel_and_wait, wait_event
from dumper.child_process import read_spec, spawn, stop_child
from dumper.server.dump.ack_gate import AckGate
from dumper.server.serve_state import ServeState, ServeView, SharedStateNotifier

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0  # Python start + imports on a loaded 2-core machine
STOP_TIMEOUT_S = 10.0
START_ATTEMPTS = 5
REPORT_S = 0.5
# The leader re-publishes at least this often (role changes, a writer opened by a takeover).
REPUBLISH_S = 0.05


# -- the leader's side --------------------------------------------------------------------------
class ServeProcess:
    """Starts and feeds the server process. The callables are read on the leader's loop:
    `writer_end()` → (file, end of the last whole transaction) or None (no writer here: serve
    the files as they are, e.g. an HA follower's copy, which holds whole transactions only)."""

    def __init__(
        self,
        config: Config,
        binlog_dir: str | os.PathLike[str],
        *,
        current_notify: Callable[[], asyncio.Event],
        writer_end: Callable[[], tuple[str, int] | None],
        leading: Callable[[], bool] = lambda: True,
        read_only: Callable[[], bool] = lambda: False,
        term: Callable[[], int] = lambda: 0,
        sure_until: Callable[[], float] = lambda: math.inf,
        merged_tso: Callable[[], int] = lambda: 0,
        acks: AckGate | None = None,
        schema: str = "history",
        server_uuid: str = "",
    ) -> None:
        self.config = config
        self.server_uuid = server_uuid
        self.dir = Path(binlog_dir)
        self._current = current_notify
        self._writer_end = writer_end
        self._merged_tso = merged_tso
        self._leading = leading
        self._read_only = read_only
        self._term = term
        self._sure_until = sure_until
        self.acks = acks
        self._schema = schema
        self.host = config.dumper.host
        self.port = 0
        self.pid = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._state: ServeState | None = None
        self._state_fd = -1
        self._wake_w = -1
        self._tasks: list[asyncio.Task] = []
        self.restarts = 0
        self._consumers: list[dict] = []  # as the server process last reported them
        self._holds: dict = {"consumers": [], "dropped": 0}
        self.purged = 0  # files purged by retention
        self._purged_before = 0  # by earlier server processes

    def consumers(self) -> list[dict]:
        """The server process's dumps as of its last report (at most REPORT_S old)."""
        return self._consumers

    def consumer_holds(self) -> dict:
        """The named consumers' holds as of the server process's last report."""
        return self._holds

    def _view(self) -> ServeView:
        merged = self._merged_tso()  # before the end: what it covers is written by then
        end = self._writer_end()
        limit = None
        if end is not None:
            with contextlib.suppress(ValueError):
                limit = (file_number(end[0]), end[1])
        bound = self.acks.bound() if self.acks is not None and self.acks.bound else None
        return ServeView(
            limit,
            self._leading(),
            self._read_only(),
            self._term(),
            merged,
            self._sure_until(),
            bound,
        )

    def publish(self) -> None:
        """Tell the server how far it may serve now, and wake its waiting dumps."""
        if self._state is None:
            return
        self._state.publish(self._view())
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"\0")  # full: a wake-up is pending already

    async def start(self) -> ServeProcess:
        self._state, self._state_fd = ServeState.anonymous()
        wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._state.publish(self._view())  # before the child reads anything
        self._tasks = [asyncio.create_task(self._watch(), name="serve-publish")]
        try:
            for attempt in range(START_ATTEMPTS):
                try:
                    await self._spawn(wake_r)
                    break
                except RuntimeError:
                    # e.g. the port still held by the server process of a leader that was
                    # just killed (it closes it on its stdin's EOF, a moment later)
                    if attempt + 1 == START_ATTEMPTS:
                        raise
                    await asyncio.sleep(1)
        except BaseException:
            await self.close()
            raise
        finally:
            os.close(wake_r)
        self._tasks.append(asyncio.create_task(self._supervise(), name="serve-process"))
        return self

    async def _spawn(self, wake_r: int) -> None:
        acks = None
        if self.acks is not None:
            acks = (
                sorted(self.acks.follower_ids),
                self.acks.live_s,
                self.acks.wait_s,
                self.acks.bound is not None,  # the HA node records a served bound
            )
        spec = {
            "config": self.config,
            "port": self.port or self.config.dumper.port,  # a restart keeps the port
            "dir": str(self.dir),
            "state_fd": self._state_fd,
            "wake_fd": wake_r,
            "acks": acks,
            "schema": self._schema,
            "server_uuid": self.server_uuid,
            "log_level": logging.getLogger().getEffectiveLevel(),
        }
        self._proc = await spawn(
            "dumper.server.serve_process", spec, pass_fds=(wake_r, self._state_fd)
        )
        self.pid = self._proc.pid
        # stdin then stays open: its end tells the child that the leader is gone.
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), START_TIMEOUT_S)
            self.port = int(json.loads(line)["port"])
        except (TimeoutError, ValueError, KeyError) as exc:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
            raise RuntimeError(f"the dumper's server process did not start: {exc!r}") from None

    async def _watch(self) -> None:
        while True:
            event = self._current()
            if event.is_set():  # not replaced after set (the Leader replaces it): just poll
                await asyncio.sleep(REPUBLISH_S)
            else:
                await wait_event(event, REPUBLISH_S)
            self.publish()

    async def _supervise(self) -> None:
        """Read the server's reports; a server process that dies (killed, out of memory) is
        started again on the same port: the leader and its writer go on regardless."""
        while True:
            assert self._proc is not None and self._proc.stdout is not None
            while line := await self._proc.stdout.readline():
                try:
                    report = json.loads(line)
                except ValueError:
                    continue
                if self.acks is not None and "acks" in report:
                    self.acks.load_report(report["acks"])
                if "holds" in report:
                    self._holds = report["holds"]
                if "consumers" in report:
                    self._consumers = report["consumers"]
                    self.purged = self._purged_before + int(report.get("purged", 0))
            code = await self._proc.wait()
            self.restarts += 1
            self._consumers = []  # their connections went with the process
            self._purged_before = self.purged
            log.error("the dumper's server process ended (exit code %s): starting it again", code)
            await asyncio.sleep(1)
            wake_r, wake_w = os.pipe()  # the old read end went with the old process
            os.set_blocking(wake_w, False)
            os.close(self._wake_w)
            self._wake_w = wake_w
            try:
                await self._spawn(wake_r)
            except RuntimeError as exc:
                log.error("%s", exc)
                continue  # (the loop waits on the dead process again, then retries)
            finally:
                os.close(wake_r)

    async def close(self) -> None:
        await cancel_and_wait(self._tasks)
        await stop_child(self._proc, STOP_TIMEOUT_S)
        if self._wake_w >= 0:
            os.close(self._wake_w)
            self._wake_w = -1
        if self._state is not None:
            self._state.close()
            os.close(self._state_fd)
            self._state = None

    async def __aenter__(self) -> ServeProcess:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# -- the server process -------------------------------------------------------------------------
class ReportPipe:
    """The child's reports to the leader, never blocking the server: a leader that does not
    read for a while (a long GC, a stopped process) must not stop the dumps. The pipe is
    non-blocking; a line that does not fit whole is finished before the next one, and a report
    due meanwhile is dropped (the next one, REPORT_S later, says the same and newer)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self._pending = b""
        self.dropped = 0

    def send(self, line: bytes) -> None:
        if self._pending:
            self._write()
            if self._pending:
                self.dropped += 1
                return
        self._pending = line
        self._write()

    def _write(self) -> None:
        try:
            n = os.write(self.fd, self._pending)
        except BlockingIOError:
            return
        self._pending = self._pending[n:]


async def _child(spec: dict) -> None:
    from dumper.server.server import serve
    from dumper.server.sql.schema import InMemorySchemaProvider

    config: Config = spec["config"]
    loop = asyncio.get_running_loop()
    state = ServeState(spec["state_fd"])
    os.close(spec["state_fd"])
    notifier = SharedStateNotifier(state)
    wake_fd = spec["wake_fd"]
    os.set_blocking(wake_fd, False)
    stop = asyncio.Event()

    term = state.read().term
    acks: AckGate | None = None

    def on_wake() -> None:
        nonlocal term
        try:
            if not os.read(wake_fd, 4096):
                stop.set()  # the leader closed its end
                return
        except BlockingIOError:
            return
        now = state.read().term
        if now != term and acks is not None:
            acks.reset()  # a new term: acknowledgements of an earlier one say nothing of it
        term = now
        if acks is not None:
            acks.bound_changed()  # dumps held at the served bound look again
        notifier.wake()

    loop.add_reader(wake_fd, on_wake)
    stdin = sys.stdin.buffer.fileno()
    os.set_blocking(stdin, False)

    def on_stdin() -> None:
        try:
            if not os.read(stdin, 4096):
                stop.set()
        except BlockingIOError:
            pass

    loop.add_reader(stdin, on_stdin)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    if spec["acks"] is not None:
        ids, live_s, wait_s, bounded = spec["acks"]
        acks = AckGate(
            ids,
            live_ms=int(live_s * 1000),
            wait_ms=int(wait_s * 1000),
            active=lambda: state.read().leading,
            sure=lambda: time.monotonic() < state.read().sure_until,
            bound=(lambda: state.read().served_bound) if bounded else None,
        )
    if spec["schema"] == "history":
        from dumper.server.sql.history_schema import HistorySchemaProvider
        from topology import gms

        schema = HistorySchemaProvider(
            lambda: gms.connect(config.gms), config.pipeline.meta_database
        )
    else:
        schema = InMemorySchemaProvider()
    snapshot = None
    if spec["schema"] == "history":  # a cluster behind: rows of logical tables can be read
        from read_path import SnapshotSource

        snapshot = SnapshotSource(config)
    config.dumper.port = spec["port"]
    server = await serve(
        config.dumper,
        spec["dir"],
        notifier=notifier,
        schema=schema,
        read_only=lambda: state.read().read_only,
        acks=acks,
        server_uuid=spec["server_uuid"],
        snapshot=snapshot,
    )
    out = sys.stdout.buffer
    out.write(json.dumps({"port": server.port}).encode() + b"\n")
    out.flush()
    reports = ReportPipe(out.fileno())
    try:
        while not stop.is_set():
            if acks is not None:
                # A dump held at the served bound is reported at once (the leader records a
                # further bound: every wait there is the consumers').
                await _first(stop, acks.asked, REPORT_S)
                acks.asked.clear()
            else:
                await wait_event(stop, REPORT_S)
            report: dict = {
                "consumers": server.consumers(),
                "purged": server.retention.purged,
                "holds": server.consumer_holds(),
            }
            if acks is not None:
                report["acks"] = acks.report()
            reports.send(json.dumps(report).encode() + b"\n")
    finally:
        await server.close()
        state.close()


async def _first(a: asyncio.Event, b: asyncio.Event, timeout: float) -> None:
    """Until `a` or `b` is set, at most `timeout` seconds."""
    waits = [asyncio.ensure_future(e.wait()) for e in (a, b)]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def main() -> int:
    spec = read_spec()
    if spec is None:
        return 1  # the leader went before it sent the spec
    logging.basicConfig(
        level=spec["log_level"],
        format="%(asctime)s %(levelname)s %(name)s [serve]: %(message)s",
        stream=sys.stderr,
    )
    # A snapshot read holds a few pages of rows per shard (two tuples a row): the default gen-0
    # threshold re-scanned them every 700 allocations (a page's split took ~1.5x as long).
    tune_memory(keep_heap=False)  # its RSS is what consumers cost (memory_tune.py)
    try:
        asyncio.run(_child(spec))
    except BrokenPipeError:
        return 0  # the leader went away while we reported
    return 0


if __name__ == "__main__":
    sys.exit(main())
