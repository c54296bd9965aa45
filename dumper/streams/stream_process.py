"""One stream of a multi-stream global binlog, in a process of its own (docs/streams.md): its
writer (files, index, GTIDs, recovery, fsync) and, through `dumper.service.serve`, its status
file, metrics and MySQL protocol server on its own port (the server in a child process, as for
the single stream). It is fed by the merge process over the stage contract in frames.proto,
on its stdin; its answers go to its stdout. The end of its stdin means the merge process is
gone: the stream stops (its consumers reconnect to the next one on the same port). A stream on
another host (`cdc stream serve`, listener.py) gets the same frames on a TCP link whose socket
its listener hands it: the end of the link stops it, as does the end of its stdin (the listener
is gone), and its status file goes to the merge over the link.

Why a process per stream: CRC32 of every byte, the stamping, fsync and all of serving are the
core-bound part of writing; in one process the streams would share one interpreter lock. And
a stream that is a process fed by a byte stream can run on another host: the same frames over
TCP instead of a pipe (docs/streams.md, "A stream on another host").

The restart protocol holds per stream (docs/ARCHITECTURE.md, "Restart protocol"): the writer
cuts a torn tail at open; `resume` answers the key its binlog ends at (its last CTS mark, or
its saved progress when that is further: an idle stream holds no transaction of the last
batches, but the merge must not re-send it everything since its last one); `sync` makes all
received durable before the merge saves DN checkpoints past it.

A full file system pauses the stream in place, as it pauses the single stream's pipeline
(docs/faults.md): the failed write is cut back to the last whole transaction, the stream tells
the merge it waits (`paused`) and reads no frame meanwhile (the merge's sends back up behind
it), its server goes on serving what is written; once there is room the writer opens again
and the frame that failed is done again from where the file ends (a batch: its transactions
past the last GTID that made it).

An HA leader's stream (docs/streams.md, "HA followers") is told by the merge how long its lease
is sure (`Sure` frames, `stream_term.LeaseDeadline`): its ack gate gives up waiting for its
followers only until then, and serves no further than the bound it recorded in the GMS first
(`served_bound.BoundRecorder`). Told to `abandon` (the merge's term ended), or stopping once that
deadline passed (its merge gone or cut off: a successor may write), it leaves its writer
without a STOP event, as a fenced single-stream leader does; a clean stop writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from binlog_writer import BinlogWriter, last_written_key
from cdc.config import Config
from cdc.files import write_atomically
from cdc.keys import GlobalKey
from cdc.pauses import Pauses, is_disk_full
from cdc.streams import STREAM_PROGRESS_FILE, stream_config, stream_server_uuid
from dumper.child_process import read_spec
from dumper.pipeline import LeaderStats, write_status
from dumper.pipeline.binlog_output import gtid_layout, open_writer
from dumper.pipeline.disk_room import reopen_with_room
from dumper.streams.link import READ_LIMIT
from dumper.streams.wire import FromStream, ToStream, framed, key_message, read_frame

if TYPE_CHECKING:
    from dumper.ha.stream_term import LeaseDeadline

log = logging.getLogger(__name__)


def read_progress(directory: Path) -> GlobalKey | None:
    try:
        text = (directory / STREAM_PROGRESS_FILE).read_text().split()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return GlobalKey(*map(int, text)) if len(text) == 4 else None


def write_progress(directory: Path, key: GlobalKey) -> None:
    """After the binlog's fsync: the progress never claims what is not durable."""
    write_atomically(directory / STREAM_PROGRESS_FILE, " ".join(map(str, key)), fsync=True)


class StreamWriter:
    """The writing half of a stream process: frames in, binlog files out."""

    def __init__(self, config: Config, stream: int, cluster_uuid: str, pauses: Pauses):
        """`config`: the stream's own (`cdc.streams.stream_config`); `pauses`: its process's
        (a full disk is shown there)."""
        self.config = config
        self.stream = stream
        self.server_uuid = stream_server_uuid(cluster_uuid, stream)
        self.pauses = pauses
        self.writer = self._open_writer()
        self.progress = read_progress(self.writer.dir)
        self.merged_tso = 0
        self.stats = LeaderStats()  # (restarts and spilled_bytes stay 0 here)
        self.notify = asyncio.Event()  # set after each batch reached the file (the server)
        self._file_first_tso: dict[str, int] = {}
        self._open_part: tuple[str, int] | None = None  # a huge transaction: (file, bytes so far)
        self.lease: LeaseDeadline | None = None  # HA: how long the merge's lease is sure
        self.abandoned = False  # the merge's term ended: nothing more is written

    def sure_until(self) -> float:
        """Until when (monotonic) the merge's lease is sure (no HA: for ever)."""
        return math.inf if self.lease is None else self.lease.until

    def _open_writer(self) -> BinlogWriter:
        # (`stream_config` gave the stream a GTID domain of its own: `stream_gtid_domain`)
        return open_writer(self.config, gtid_layout(self.config, self.server_uuid))

    def end_key(self) -> GlobalKey | None:
        """Where this stream's binlog ends: its last transaction's key or its progress."""
        last = last_written_key(self.writer)
        if self.progress is None:
            return last
        return self.progress if last is None or self.progress > last else last

    async def run(self, reader: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
        """Frames until the merge process is gone (or its term ended: `abandon`)."""
        while not self.abandoned and (frame := await read_frame(reader, ToStream)) is not None:
            # Where the frame begins: after a full disk, what of it is in the file already.
            gno, file = self.writer.gno, self.writer.file
            while True:
                try:
                    self._handle(frame, out, self.writer.gno - gno, file)
                    break
                except OSError as exc:
                    if not is_disk_full(exc):
                        raise
                    await self._wait_for_room(str(exc), out)
                if self._open_part is not None:
                    raise RuntimeError(
                        f"stream {self.stream}: a full disk cut a huge transaction short: "
                        "restarting, the merge sends it again"
                    )
                if self.writer.gno < gno:
                    raise RuntimeError(
                        f"stream {self.stream}: after a full disk {self.writer.dir} ends at "
                        f"GTID {self.writer.gno}, before the {gno} it had written: restarting "
                        "from where it ends"
                    )
            await out.drain()

    def _handle(self, frame, out: asyncio.StreamWriter, done: int, file: str) -> None:
        """One frame; `done`, `file`: a retry after a full disk (the batch's transactions in
        the file already, the file the frame began in)."""
        body = frame.WhichOneof("body")
        if body == "batch":
            self._append(frame.batch, done)
        elif body == "part":
            self._part(frame.part)
        elif body == "resume":
            if self._open_part is not None:  # the merge starts again: it sends it again whole
                self.writer.abort_stream()
                self._open_part = None
            out.write(framed(FromStream(resumed=key_message(self.end_key()))))
        elif body == "sync":
            self.writer.sync()
            if self.progress is not None:
                write_progress(self.writer.dir, self.progress)
            out.write(framed(FromStream(synced=frame.sync)))
        elif body == "rotate":
            if self.writer.file == file:  # (a retry: the ROTATE may have made it)
                self.writer.rotate()
        elif body == "merged_tso":
            self.merged_tso = frame.merged_tso
            self._wake()
        elif body == "sure":
            if self.lease is not None:
                self.lease.heard(frame.sure.sent_ms, frame.sure.sure_ms)
        elif body == "abandon":
            log.warning("stream %d: the merge's term ended: stopping, no STOP event", self.stream)
            self.abandoned = True

    async def _wait_for_room(self, error: str, out: asyncio.StreamWriter) -> None:
        """A write failed on a full file system: paused here until there is room and the
        writer is open again (the merge is told, and waits: its frames back up meanwhile)."""
        self.writer.abandon()  # at once: nobody may be told an end inside the torn tail
        out.write(framed(FromStream(paused=f"{self.writer.dir}: {error}")))
        await out.drain()
        self.writer = await reopen_with_room(self.writer.dir, error, self.pauses, self._open_writer)
        out.write(framed(FromStream(paused="")))

    def _append(self, batch, done: int = 0) -> None:
        """`done`: its first transactions already in the file (a retry after a full disk)."""
        if batch.ends:
            ends = batch.ends
            start = ends[done - 1] if done else 0
            if done < len(ends):
                buf = bytearray(batch.events[start:] if done else batch.events)
                for file, first in self.writer.append_batch(
                    buf,
                    [e - start for e in ends[done:]],
                    [g - start for g in batch.gtids if g >= start],
                ):
                    self._file_first_tso.setdefault(file, batch.tsos[done + first])
            self.writer.flush()
            self._written(len(batch.ends), batch.event_count, len(batch.events), batch.tsos[-1])
        if batch.progress:
            self.progress = GlobalKey(*batch.progress)
            self.merged_tso = max(self.merged_tso, self.progress.tso)
        self._wake()

    def _part(self, part) -> None:
        """A part of a huge transaction (frames.proto `Part`), written as it comes: memory holds
        one part; readers see the transaction once its last part is written."""
        w = self.writer
        if part.first:
            w.begin_stream(part.size)
            self._open_part = (w.file, 0)
        assert self._open_part is not None, "a part of no transaction"
        w.write_part([part.events])
        file, size = self._open_part
        self._open_part = (file, size + len(part.events))
        if part.last:
            w.end_stream()
            w.flush()
            self._open_part = None
            self._file_first_tso.setdefault(file, part.tso)
            self._written(1, part.event_count, size + len(part.events), part.tso)
            self._wake()

    def _written(self, transactions: int, events: int, nbytes: int, last_tso: int) -> None:
        self.stats.add(transactions, events, nbytes)
        self.stats.last_tso = last_tso
        self.stats.last_commit_at = time.time()

    def _wake(self) -> None:
        self.notify.set()
        self.notify = asyncio.Event()

    def status(self) -> dict:
        """The pipeline's shape (`write_status`), lagging behind the merged TSO."""
        w = self.writer
        out = write_status(self.stats, (w.file, w.gno, w.position), self.merged_tso or None)
        out.update(
            stream=self.stream,
            pid=os.getpid(),
            port=self.config.dumper.port,
            server_uuid=self.server_uuid,
            merged_tso=self.merged_tso,
        )
        return out

    def close(self) -> None:
        if self.abandoned or time.monotonic() >= self.sure_until():
            # The term ended, or may have (its lease in doubt): a successor may write, and a
            # STOP only this copy holds would be a byte of a history that does not go on.
            self.writer.abandon()
        else:
            self.writer.close()


async def _read_pipe(fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0)
    )
    return reader


async def _pipes(
    frames_in: int, frames_out: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader = await _read_pipe(frames_in)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(frames_out, "wb", 0)
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def _until_end(fd: int) -> None:
    """Until the pipe `fd` ends (its writer, our parent, is gone)."""
    reader = await _read_pipe(fd)
    while await reader.read(4096):
        pass
    log.info("the listener is gone: stopping")


async def _send_status(state_dir: Path, out: asyncio.StreamWriter) -> None:
    """The status file the service writes (about every second), to the merge over the link:
    it keeps it where a stream on its own host writes its own."""
    last = ""
    while True:
        await asyncio.sleep(1)
        try:
            text = (state_dir / "status.json").read_text()
        except OSError:
            continue
        if text != last and not out.is_closing():
            out.write(framed(FromStream(status=text)))
            last = text


async def _serve_stream(spec: dict, frames_in: int, frames_out: int) -> None:
    from dumper.service import Role, serve  # the service imports the pipeline: not at module load

    config = stream_config(spec["config"], spec["stream"])
    linked = "frames_fd" in spec  # a TCP link (`cdc stream serve`), not the merge's pipes
    if linked:
        reader, out = await asyncio.open_connection(
            sock=socket.socket(fileno=spec["frames_fd"]), limit=READ_LIMIT
        )
    else:
        reader, out = await _pipes(frames_in, frames_out)
    pauses = Pauses()
    sw = StreamWriter(config, spec["stream"], spec["cluster_uuid"], pauses)
    term = spec.get("term", 0)
    acks = bounds = None
    status = sw.status
    if term:  # an HA leader's stream: its term's start, its followers' acknowledgements
        from dumper.ha.stream_term import LeaseDeadline, lead_stream, stream_status

        sw.lease = LeaseDeadline()
        acks, bounds = await lead_stream(config, spec["stream"], sw.writer, term, sw.lease)
        status = functools.partial(stream_status, sw.status, term, acks, bounds)

    async def run() -> None:
        try:
            await sw.run(reader, out)
        finally:
            sw.close()

    tasks = {"stream": run}
    if bounds is not None:  # a degraded gate's bound, recorded as held dumps ask for more
        tasks["served-bound"] = lambda: bounds.run(term, role.writer_end)
    if linked:  # the listener's pipe ends with it; the merge reads the status from the link
        tasks["listener"] = functools.partial(_until_end, frames_in)
        tasks["status"] = functools.partial(_send_status, Path(spec["state_dir"]), out)
    role = Role(
        tasks,
        status=status,
        binlog_dir=lambda: sw.writer.dir,
        writer=lambda: sw.writer,
        current_notify=lambda: sw.notify,
        merged_tso=lambda: sw.merged_tso,
        term=lambda: term,
        sure_until=sw.sure_until,
        acks=acks,
    )
    await serve(
        config, Path(spec["state_dir"]), role=role, server_uuid=sw.server_uuid, pauses=pauses
    )


def main() -> int:
    """The stream process: a pickled spec (length-prefixed) on stdin, then frames."""
    # stdout carries frames only: whatever prints goes to stderr.
    frames_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # The frames come in on a copy of stdin, and fd 0 is /dev/null: the end of the frames
    # closes their fd, and a number 0 free again would be the next file opened (the server's
    # shared state, which its child finds by number, where its own stdin is).
    frames_in = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    spec = read_spec(frames_in)
    if spec is None:
        return 1  # the merge process went before it sent the spec
    if "frames_fd" in spec:  # a TCP link: a fatal error goes there (stdin: our listener's)
        os.close(frames_out)
        frames_out = os.dup(spec["frames_fd"])
    logging.basicConfig(
        level=spec.get("log_level", logging.INFO),
        format=f"%(asctime)s stream{spec['stream']} %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(_serve_stream(spec, frames_in, frames_out))
    except Exception as exc:
        log.exception("stream %d stopped", spec["stream"])
        with contextlib.suppress(OSError):  # (a link the merge closed)
            os.write(frames_out, framed(FromStream(fatal_error=f"stream {spec['stream']}: {exc}")))
        return 2
    return 0
