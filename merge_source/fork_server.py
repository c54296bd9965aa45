"""A pre-imported fork server for MergeSource workers: the one way they start.

Starting Python and importing the pipeline costs a worker ~0.15 s of CPU on this machine
(more than a second of wall time when the cores are busy), once per DN and again after every
pipeline restart. The fork server pays it once: `python -m merge_source.fork_server` imports
`merge_source.worker` and everything it uses, freezes those objects for the collector, then
forks one worker per request (`worker.main`): it reads its spec on stdin and writes `wire`
frames on stdout, pipes that the leader created and passed over the control socket
(SCM_RIGHTS). Measured (3 workers, load ~4.5): spawning each as a new Python took 650-980 ms
of wall time and 400-500 ms of CPU; forking them from a running server 13-38 ms, from one
started for the occasion 350-510 ms. So a leader starts its server before it reads the GMS,
and an HA follower keeps one running for the takeover (`dumper/ha/deps.py`, `DnLeaders`).

Where it comes from: a new `python -m merge_source.fork_server`, which imports the worker's
modules again (0.12-0.19 s of CPU per start, measured in `cdc bench pipeline`), or
`ForkServer.fork_here()`: a fork of the calling process, which has imported them already
(`cdc start` calls it before its event loop starts, `dumper.service.run_service`; so does the
pipeline bench). Only while the process has a single thread: a thread holding a lock inside
a C library (OpenSSL, the resolver) at the fork would leave it locked in every worker; with
more, or once the forked server died, a new Python is started instead.

Control socket (the server's stdin, a Unix stream socket): the leader sends one byte `F` with
two descriptors (the worker's stdin read end, its stdout write end); the server answers
`P` + pid when it forked, and `X` + pid + exit code when a worker ended (it is their parent:
it reaps them; the code is `-signal` for a killed one, as `asyncio.subprocess` reports it).
End of the socket = the leader is gone: the server exits. The server dies with the leader
(`PR_SET_PDEATHSIG`), and its workers with it (the same, and their stdin ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import logging
import os
import select
import signal
import socket
import struct
import sys
import threading
import traceback
from collections import deque

log = logging.getLogger(__name__)

_SPAWNED = struct.Struct("<cI")  # b"P", pid
_EXITED = struct.Struct("<cIi")  # b"X", pid, exit code (-signal when killed)
SPAWN_TIMEOUT_S = 30.0
PIPE_BYTES = 1 << 20  # a worker's frame pipe (Linux allows up to /proc/sys/fs/pipe-max-size)
# Exit code reported for the workers of a fork server that died: they die with it (SIGKILL).
_KILLED = -signal.SIGKILL


class ForkServerError(RuntimeError):
    """The fork server could not be started or did not answer."""


# --------------------------------------------------------------------------- server side


def _serve(control: socket.socket) -> int:
    from cdc.memory_tune import tune_memory
    from merge_source import worker  # the point: import once, fork many times

    worker.die_with_parent(os.getppid())
    worker.name_process(b"cdc-forks")
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select via the wakeup fd
    tune_memory()
    while True:
        try:
            ready, _, _ = select.select([control, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 512)
            _reap(control)
        if control in ready:
            msg, fds, _, _ = socket.recv_fds(control, 16, 2)
            if not msg:
                return 0  # the leader is gone
            if len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                print(f"fork server: request with {len(fds)} descriptors", file=sys.stderr)
                return 1
            pid = os.fork()
            if pid == 0:
                _child(worker, fds, (control, wake_r, wake_w))
            for fd in fds:
                os.close(fd)
            control.sendall(_SPAWNED.pack(b"P", pid))


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        control.sendall(_EXITED.pack(b"X", pid, os.waitstatus_to_exitcode(status)))


def _child(worker, fds: list[int], server_fds: tuple) -> None:
    """In the forked worker: become `python -m merge_source.worker`; never returns."""
    rc = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control, wake_r, wake_w = server_fds
        control.close()
        os.close(wake_r)
        os.close(wake_w)
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        os.close(fds[0])
        os.close(fds[1])
        # The standard streams as files of these descriptors: a server forked from another
        # program (`fork_here`) holds that program's `sys.std*` objects, which may be anything
        # (a test runner's capture).
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (for the process's life)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        worker.name_process(b"cdc-source")
        rc = worker.main(parent=os.getppid())
        sys.stdout.flush()
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(rc)


def _forked(control: socket.socket) -> None:
    """In the process `ForkServer.fork_here` forked: become the server; never returns."""
    rc = 1
    try:
        gc.freeze()  # what the caller made stays unscanned and its finalizers never run here
        # Its handlers are the caller's: kept alive and unused (closing them here could close
        # a descriptor number a worker reuses), so that a worker's `basicConfig` applies.
        kept = logging.root.handlers[:]  # noqa: F841 (this frame never returns)
        logging.root.handlers.clear()
        # Nothing of the caller's stays open here (its GMS connections, a pid file's lock)
        # but the standard streams and the control socket.
        keep = control.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
        devnull = os.open(os.devnull, os.O_RDONLY)  # nor the caller's stdin (as `main`)
        os.dup2(devnull, 0)
        os.close(devnull)
        rc = _serve(control)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(rc)


def main() -> int:
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # fd 0 is a forked worker's spec pipe, never the control socket
    os.close(devnull)
    return _serve(control)


# --------------------------------------------------------------------------- leader side


class ForkedWorker:
    """A worker forked by the fork server, with the face `SourceProcess` uses of an
    `asyncio.subprocess.Process`: `pid`, `stdin`, `stdout`, `returncode`, `wait()`, `kill()`."""

    def __init__(
        self,
        pid: int,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        exited: asyncio.Future[int],
    ):
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self._exited = exited
        exited.add_done_callback(lambda _: stdin.close())  # its end of the pipe is gone

    @property
    def returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        if self._exited.done():
            raise ProcessLookupError(self.pid)  # as Popen: never signal a reaped pid
        os.kill(self.pid, signal.SIGKILL)


class _ForkedServer:
    """A server `ForkServer.fork_here` forked, with the face `ForkServer` uses of an
    `asyncio.subprocess.Process` (our child: reaped here, not by asyncio's watcher)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._code: int | None = None

    @property
    def returncode(self) -> int | None:
        if self._code is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self._code = os.waitstatus_to_exitcode(status)
        return self._code

    async def wait(self) -> int:
        while (code := self.returncode) is None:
            await asyncio.sleep(0.02)  # (only when it stops: its control socket's end)
        return code

    def kill(self) -> None:
        if self.returncode is not None:
            raise ProcessLookupError(self.pid)
        os.kill(self.pid, signal.SIGKILL)


class ForkServer:
    """The leader's side: starts the server on first use (and again if it died), forks workers.
    One per event loop; `aclose` when done."""

    def __init__(self, forked: tuple[_ForkedServer, socket.socket] | None = None) -> None:
        """`forked`: a server already forked and its control socket (`fork_here`)."""
        self._forked = forked
        self._proc: asyncio.subprocess.Process | _ForkedServer | None = None
        self._sock: socket.socket | None = None
        self._reader: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        # Per request in flight: its pid and the future of its exit code.
        self._replies: deque[asyncio.Future[tuple[int, asyncio.Future[int]]]] = deque()
        self._exits: dict[int, asyncio.Future[int]] = {}

    @classmethod
    def fork_here(cls) -> ForkServer:
        """A server forked from this process now, if it has a single thread (else, one that a
        new Python starts on first use). Call it before the event loop runs: the server and
        its workers inherit this process's imports instead of paying them again."""
        if threading.active_count() != 1:
            log.debug("%d threads: the fork server will be a new Python", threading.active_count())
            return cls()
        from merge_source import worker  # noqa: F401 (imported here: the forks inherit it)

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            ours.close()
            _forked(theirs)
        theirs.close()
        log.info("MergeSource fork server %d forked", pid)
        return cls((_ForkedServer(pid), ours))

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (the benches count its CPU)."""
        return self._proc.pid if self._proc is not None and self._reader is not None else None

    async def start(self) -> None:
        """Start the server now if it does not run (else `spawn` does): its imports then overlap
        whatever the caller does before the first spawn (the leader: its reads of the GMS)."""
        async with self._lock:
            if self._reader is None or self._reader.done():
                await self._start()

    async def spawn(self) -> ForkedWorker:
        """A new worker, waiting for its spec on stdin."""
        loop = asyncio.get_running_loop()
        async with self._lock:  # replies come in request order
            if self._reader is None or self._reader.done():
                await self._start()
            assert self._sock is not None
            spec_r, spec_w = os.pipe()
            out_r, out_w = os.pipe()
            # Frames are up to hundreds of KB: with the default 64 KB the worker blocks and the
            # leader wakes up and reads many times per frame.
            with contextlib.suppress(OSError):
                fcntl.fcntl(out_r, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
            try:
                reply: asyncio.Future[tuple[int, asyncio.Future[int]]] = loop.create_future()
                self._replies.append(reply)
                socket.send_fds(self._sock, [b"F"], [spec_r, out_w])
            except BaseException:
                for fd in (spec_w, out_r):
                    os.close(fd)
                raise
            finally:
                os.close(spec_r)
                os.close(out_w)
            try:
                async with asyncio.timeout(SPAWN_TIMEOUT_S):
                    pid, exited = await reply
            except BaseException:
                os.close(spec_w)
                os.close(out_r)
                raise
        stdout = asyncio.StreamReader(limit=1 << 20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stdout), open(out_r, "rb", buffering=0)
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, open(spec_w, "wb", buffering=0)
        )
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        return ForkedWorker(pid, stdin, stdout, exited)

    async def _start(self) -> None:
        await self._stop()
        if self._forked is not None:  # the one `fork_here` made, on its first use
            (self._proc, ours), self._forked = self._forked, None
        else:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "merge_source.fork_server", stdin=theirs.fileno()
                )
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._reader = asyncio.create_task(self._read(ours), name="fork-server")
        log.info("MergeSource fork server %d started", self._proc.pid)

    async def _read(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        buf = b""
        try:
            while data := await loop.sock_recv(sock, 4096):
                buf += data
                while buf:
                    if buf[:1] == b"P" and len(buf) >= _SPAWNED.size:
                        _, pid = _SPAWNED.unpack_from(buf)
                        buf = buf[_SPAWNED.size :]
                        exited = self._exits[pid] = loop.create_future()
                        reply = self._replies.popleft()
                        if not reply.done():
                            reply.set_result((pid, exited))
                    elif buf[:1] == b"X" and len(buf) >= _EXITED.size:
                        _, pid, code = _EXITED.unpack_from(buf)
                        buf = buf[_EXITED.size :]
                        exited = self._exits.pop(pid, None)
                        if exited is not None and not exited.done():
                            exited.set_result(code)
                    elif buf[:1] in (b"P", b"X"):
                        break  # the rest of a message is still on its way
                    else:
                        raise ForkServerError(f"fork server sent {buf[:16]!r}")
        finally:
            # Gone (killed, crashed): its workers were killed with it (PR_SET_PDEATHSIG).
            self._fail_all()

    def _fail_all(self) -> None:
        for reply in self._replies:
            if not reply.done():
                reply.set_exception(ForkServerError("the MergeSource fork server ended"))
        self._replies.clear()
        for exited in self._exits.values():
            if not exited.done():
                exited.set_result(_KILLED)
        self._exits.clear()

    async def _stop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
        if self._sock is not None:
            self._sock.close()  # end of its control socket: the server exits
            self._sock = None
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(BaseException):
                async with asyncio.timeout(5):
                    await proc.wait()
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(BaseException):
                    await proc.wait()

    async def aclose(self) -> None:
        await self._stop()
        if self._forked is not None:  # forked, never used: stopped like a used one
            (self._proc, self._sock), self._forked = self._forked, None
            await self._stop()


if __name__ == "__main__":
    sys.exit(main())
