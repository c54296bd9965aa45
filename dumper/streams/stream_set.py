"""The merge process's side of the stream processes (docs/streams.md): starts one process per
stream (`stream_process.py`), feeds each its frames, and reads their answers. A stream on
another host (`[dumper.stream_addresses]`) is linked to over TCP instead (`link.connect`, to its
`cdc stream serve`): the same frames, the same protocol; its end of a link is a process too.

A stream process that dies (killed, crashed) is found by the end of its stdout (or of its
link); the merge then raises `StreamDied`, and the pipeline restarts as after a MergeSource's
death (`Leader.run`): the dead stream is started again (a remote one is linked again and its
listener starts its process; while the listener cannot be reached the merge waits, paused),
recovers its files, and every stream says where it ends (`resume`), from which the DNs are
read again. The streams that lived keep their processes, so their consumers stay connected.

A stream whose binlog's file system is full says so (`paused`) and waits in place: the merge
shows the pause (BINLOG_DISK_FULL, as the single stream's pipeline does), waits for its answers
without a timeout meanwhile, and is held back by the frames backing up behind it.

HA (docs/streams.md, "HA followers"): every `SURE_EVERY_S` each stream is told how long the
merge's lease is sure (`Sure`: its ack gate may give up waiting for followers only until then);
a term that ended (fenced) tells each stream to `abandon` before its stdin (or link) closes:
it stops without a STOP event."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from cdc.config import Config
from cdc.files import write_atomically
from cdc.keys import GlobalKey
from cdc.pauses import BINLOG_DISK_FULL, STREAM_UNREACHABLE, Backoff, Pauses
from cdc.streams import stream_address
from dumper.child_process import stop_child
from dumper.pipeline.output import STREAM_PART_BYTES
from dumper.streams.frames_pb2 import Part, Sure
from dumper.streams.link import LinkRefused, connect
from dumper.streams.spawn import spawn_stream
from dumper.streams.wire import FromStream, ToStream, WireError, framed, message_key, read_frame
from merge_source import SourceProcessDied

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0  # Python start + imports on a loaded 2-core machine
STOP_TIMEOUT_S = 15.0
SYNC_TIMEOUT_S = 60.0
RECONNECT_CAP_S = 5.0  # the longest wait between two tries to reach a stream on another host
# How often an HA merge tells its streams how long its lease is sure: well within the sure
# window (1.5 renew intervals), so a stream's deadline moves on before it passes.
SURE_EVERY_S = 0.2
SURE_MAX_MS = 2**32
PIPE_BYTES = (
    1 << 20
)  # the frames' pipe to a local stream's process (Linux's default maximum)  # what "sure for ever" is sent as (a merge without an HA node: tests)


class StreamDied(SourceProcessDied):
    """A stream's process ended: handled as a MergeSource's death is (the pipeline restarts
    from the binlogs and the checkpoints, `Leader.run`)."""


class StreamProcess:
    """One stream's process, as the merge process sees it."""

    def __init__(
        self,
        config: Config,
        stream: int,
        cluster_uuid: str,
        state_dir: Path,
        on_pause: Callable[[], None] = lambda: None,
    ):
        """`on_pause`: called when `paused` changed."""
        self.config = config
        self.stream = stream
        self.cluster_uuid = cluster_uuid
        self.state_dir = state_dir
        self.paused: str | None = None  # why the stream waits (a full disk), as it said
        self._went_on = 0.0  # (monotonic) when it last stopped waiting
        self._on_pause = on_pause
        self.address = stream_address(config.dumper, stream)  # None: a process of ours
        self.proc: asyncio.subprocess.Process | None = None  # (a stream of ours)
        # the link's byte streams: the process's stdout and stdin, or a TCP connection
        self._in: asyncio.StreamReader | None = None
        self._out: asyncio.StreamWriter | None = None
        self._reader: asyncio.Task | None = None
        self._waiting: dict[str, asyncio.Future] = {}  # by the answer's name
        self._syncs: dict[int, asyncio.Future] = {}  # by the sync's number
        self.error: str | None = None
        self.unreachable: str | None = None  # a remote stream's link cannot be had: why
        self.restarts = 0
        self._sync_no = 0

    @property
    def alive(self) -> bool:
        return (
            self._out is not None
            and self._reader is not None
            and not self._reader.done()
            and self.error is None
        )

    async def start(self, term: int = 0) -> None:
        """`term`: the HA lease term this process leads in (0: no HA)."""
        if self._out is not None:
            self.restarts += 1
            await self.stop()
        self.error = None
        self._set_paused(None)
        if self.address is not None:
            self._in, self._out = await self._connect()
        else:
            self.proc = await spawn_stream(
                self.config, self.stream, self.cluster_uuid, self.state_dir, term
            )
            self._in, self._out = self.proc.stdout, self.proc.stdin
            _widen_pipe(self._out)
            log.info("stream %d: process %d started", self.stream, self.proc.pid)
        self._reader = asyncio.create_task(self._read(), name=f"stream{self.stream}-answers")

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A link to the stream's listener on another host; while it cannot be had, the
        merge waits, paused (`stream_unreachable`), retrying with a backoff: the merge cannot
        restart a process on another host, whoever runs its listener does."""
        assert self.address is not None
        host, port = self.address
        backoff = Backoff(cap=RECONNECT_CAP_S)
        while True:
            try:
                link = await connect(
                    host, port, self.stream, self.cluster_uuid, self.config.dumper.stream_secret
                )
            except (OSError, TimeoutError, LinkRefused) as exc:
                self.unreachable = f"stream {self.stream} at {host}:{port}: {exc or 'timed out'}"
                self._on_pause()
                await asyncio.sleep(backoff.next())
                continue
            if self.unreachable is not None:
                self.unreachable = None
                self._on_pause()
            log.info("stream %d: linked to %s:%d", self.stream, host, port)
            return link

    async def _read(self) -> None:
        assert self._in is not None
        try:
            while (frame := await read_frame(self._in, FromStream)) is not None:
                body = frame.WhichOneof("body")
                if body == "status":
                    self._keep_status(frame.status)
                    continue
                if body == "paused":
                    self._set_paused(frame.paused or None)
                    continue
                if body == "fatal_error":
                    self.error = frame.fatal_error
                    log.error("stream %d stopped: %s", self.stream, self.error)
                    continue
                if body == "synced":
                    # Syncs are answered in order and each covers all received before it:
                    # every ask up to this number is answered (the checkpoint loop and a
                    # caller may ask at the same time).
                    for n in [n for n in self._syncs if n <= frame.synced]:
                        future = self._syncs.pop(n)
                        if not future.done():
                            future.set_result(n)
                    continue
                future = self._waiting.pop(body, None)
                if future is not None and not future.done():
                    future.set_result(getattr(frame, body))
        except WireError as exc:
            self.error = str(exc)
        except OSError as exc:  # (a TCP link reset)
            self.error = f"stream {self.stream}: {exc}"
        if self.proc is not None:
            code = await self.proc.wait()
            ended = f"stream {self.stream}'s process ended (exit code {code})"
        else:
            ended = "stream {} at {}:{}: the link ended".format(self.stream, *self.address)
            (self.state_dir / "status.json").unlink(missing_ok=True)  # (shows: no status)
        if self.error is None:
            self.error = ended
        for future in [*self._waiting.values(), *self._syncs.values()]:
            if not future.done():
                future.set_exception(StreamDied(self.error))
        self._waiting.clear()
        self._syncs.clear()
        self._set_paused(None)

    def _set_paused(self, why: str | None) -> None:
        if why != self.paused:
            self.paused = why
            if why is not None:
                log.warning("stream %d waits: %s", self.stream, why)
            else:
                self._went_on = time.monotonic()
            self._on_pause()

    def send(self, message: ToStream) -> None:
        """Queue a frame (the transport buffers it; `drain` waits for room)."""
        if not self.alive:
            raise StreamDied(self.error or f"stream {self.stream} is not running")
        assert self._out is not None
        self._out.write(framed(message))

    def send_pieces(self, pieces: Iterable[bytes | bytearray]) -> None:
        """Queue one frame written in pieces (`wire.batch_frame`), none of them copied first."""
        if not self.alive:
            raise StreamDied(self.error or f"stream {self.stream} is not running")
        assert self._out is not None
        for piece in pieces:
            self._out.write(piece)

    async def drain(self) -> None:
        assert self._out is not None
        try:
            await self._out.drain()
        except (ConnectionError, BrokenPipeError) as exc:
            raise StreamDied(self.error or f"stream {self.stream}: {exc}") from exc

    async def ask(self, message: ToStream, answer: str, timeout: float) -> object:
        future = asyncio.get_running_loop().create_future()
        if answer == "synced":
            self._syncs[message.sync] = future
        else:
            self._waiting[answer] = future
        self.send(message)
        await self.drain()
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                # A paused stream answers once it goes on (after the frames before this one):
                # the timeout counts from then.
                if self.paused is None and time.monotonic() - self._went_on >= timeout:
                    future.cancel()
                    raise StreamDied(
                        f"stream {self.stream}: no answer to {answer} in {timeout}s"
                    ) from None

    async def resume_key(self) -> GlobalKey | None:
        key = await self.ask(ToStream(resume=True), "resumed", START_TIMEOUT_S)
        return message_key(key)  # type: ignore[arg-type]

    async def sync(self) -> None:
        self._sync_no += 1
        await self.ask(ToStream(sync=self._sync_no), "synced", SYNC_TIMEOUT_S)

    def _keep_status(self, text: str) -> None:
        """A remote stream's status file, kept where a local one writes its own (a status
        that cannot be kept, on a full disk, is shown stale: the link goes on)."""
        with contextlib.suppress(OSError):
            self.state_dir.mkdir(parents=True, exist_ok=True)
            write_atomically(self.state_dir / "status.json", text)

    async def stop(self) -> None:
        if self.proc is not None:
            await stop_child(self.proc, STOP_TIMEOUT_S)
        elif self._out is not None:  # the end of the link stops the stream's process there
            self._out.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(self._out.wait_closed(), STOP_TIMEOUT_S)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None


def _widen_pipe(out: asyncio.StreamWriter) -> None:
    """The frames' pipe to a stream's process holds PIPE_BYTES (Linux; 64 KB otherwise): a
    batch's frame goes in with one write and is read with one wake-up of the stream's process,
    where 64 KB took a dozen of each (and a wake-up of the merge's loop for each) on a machine
    whose cores the merge shares with the streams. Best effort: a system limit keeps 64 KB."""
    pipe = out.transport.get_extra_info("pipe")
    if pipe is not None and hasattr(fcntl, "F_SETPIPE_SZ"):
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)


class StreamSet:
    """Every stream's process: what the merge's `StreamOutput` sends into."""

    def __init__(
        self,
        config: Config,
        cluster_uuid: str,
        state_dir: Path,
        pauses: Pauses | None = None,
    ):
        """`pauses`: the merge process's (a stream that waits for room shows there)."""
        self.config = config
        self.pauses = pauses or Pauses()
        self.processes = [
            StreamProcess(config, i, cluster_uuid, state_dir / f"stream{i}", self._paused)
            for i in range(config.dumper.streams)
        ]
        self.term = 0  # HA: the lease term the streams are written in (0: no HA)
        # HA: until when (monotonic) the merge's lease is sure (`HaNode.sure_until`)
        self.sure_until: Callable[[], float] = lambda: math.inf
        self._sure_task: asyncio.Task | None = None
        self._abandoned = False

    def sure(self) -> ToStream:
        """The frame that tells a stream how long the lease is sure, from now."""
        now = time.monotonic()
        left = self.sure_until() - now
        sure_ms = SURE_MAX_MS if left == math.inf else min(max(0, int(left * 1000)), SURE_MAX_MS)
        return ToStream(sure=Sure(sent_ms=int(now * 1000), sure_ms=sure_ms))

    async def _tell_sure(self) -> None:
        while True:
            message = self.sure()
            for p in self.processes:
                # (a paused stream reads nothing: its deadline passes, it is in doubt)
                if p.alive and p.paused is None:
                    with contextlib.suppress(StreamDied):
                        p.send(message)
            await asyncio.sleep(SURE_EVERY_S)

    async def start(self) -> list[GlobalKey | None]:
        """(Re)start the processes that are not running; then where each stream ends."""
        for p in self.processes:
            if not p.alive:
                await p.start(self.term)
        if self.term and self._sure_task is None:
            self._sure_task = asyncio.create_task(self._tell_sure(), name="streams-sure")
        return list(await asyncio.gather(*(p.resume_key() for p in self.processes)))

    def _paused(self) -> None:
        waiting = [f"stream {p.stream}: {p.paused}" for p in self.processes if p.paused]
        if waiting:
            self.pauses.begin(BINLOG_DISK_FULL, "; ".join(waiting))
        else:
            self.pauses.end(BINLOG_DISK_FULL)
        unreachable = [p.unreachable for p in self.processes if p.unreachable]
        if unreachable:
            self.pauses.begin(STREAM_UNREACHABLE, "; ".join(unreachable))
        else:
            self.pauses.end(STREAM_UNREACHABLE)

    def check(self) -> None:
        for p in self.processes:
            if not p.alive:
                raise StreamDied(p.error or f"stream {p.stream} is not running")

    def send(self, stream: int, message: ToStream) -> None:
        self.processes[stream].send(message)

    def send_pieces(self, stream: int, pieces: Iterable[bytes | bytearray]) -> None:
        self.processes[stream].send_pieces(pieces)

    def send_all(self, message: ToStream) -> None:
        for p in self.processes:
            p.send(message)

    async def drain(self, streams: Iterable[int] | None = None) -> None:
        """Until there is room in the pipes (or links) of `streams` (default: every stream)."""
        for i in range(len(self.processes)) if streams is None else streams:
            await self.processes[i].drain()

    async def send_streamed(
        self,
        stream: int,
        events: Iterator[bytes | bytearray],
        size: int,
        tso: int,
        fence: Callable[[], None] | None = None,
        part_bytes: int = STREAM_PART_BYTES,
    ) -> tuple[int, int]:
        """A huge transaction's encoded `events` to `stream` in parts of about `part_bytes`
        (frames.proto `Part`), read from `events` as they go: memory holds
        one part, the pipe's backpressure paces the reads. `size`: the transaction's (a hint
        for the file's rotation); `fence`: called between parts (an HA term that ended stops
        it). Returns its events and bytes."""
        process = self.processes[stream]
        part: list[bytes | bytearray] = []
        count = sent = part_size = 0
        first = True
        for e in events:
            part.append(e)
            part_size += len(e)
            if part_size >= part_bytes:
                process.send(ToStream(part=Part(events=b"".join(part), first=first, size=size)))
                count, sent, first = count + len(part), sent + part_size, False
                part, part_size = [], 0
                await process.drain()
                if fence is not None:
                    fence()
        count, sent = count + len(part), sent + part_size
        last = Part(events=b"".join(part), first=first, size=size, last=True, tso=tso)
        last.event_count = count
        process.send(ToStream(part=last))
        return count, sent

    async def sync(self) -> None:
        """Every stream made all it received durable."""
        await asyncio.gather(*(p.sync() for p in self.processes))

    def rotate(self) -> None:
        self.send_all(ToStream(rotate=True))

    def abandon(self) -> None:
        """The term ended (`StreamOutput.close` when its fence refuses): each stream is told to
        stop without a STOP event; `aclose` then closes its stdin (or link) behind that frame.
        (A stream that does not read it in time, its merge gone or cut off, finds its lease
        deadline passed when its frames end, and abandons its writer all the same.)"""
        if self._abandoned:
            return
        self._abandoned = True
        if self._sure_task is not None:
            self._sure_task.cancel()
        for p in self.processes:
            if p.alive:
                with contextlib.suppress(StreamDied):
                    p.send(ToStream(abandon=True))

    async def aclose(self) -> None:
        if self._sure_task is not None:
            self._sure_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sure_task
            self._sure_task = None
        await asyncio.gather(*(p.stop() for p in self.processes), return_exceptions=True)
