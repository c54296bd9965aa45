"""`cdc stream serve --stream i`: stream i on a host of its own (docs/streams.md, "A stream on
another host"). It listens for the merge on `[dumper.stream_addresses]` i (or `--listen`);
for each merge that logs in (`link.accept`) it starts the stream's process as the merge does
on one host (`stream_process.py`, its binlog directory and MySQL port from this host's
configuration), handing it the connection: the process reads the frames from the socket, and
stops when the link ends, as a local one stops at the end of its pipe.

One merge at a time, the newest wins: a merge that logs in while a process still runs for an
earlier link stops that process first (the earlier link may be half-open, its merge gone
without a FIN). The listener is the process's supervisor: a process that dies ends its link,
the merge reconnects, and a new process recovers the files. Whoever runs the listener (systemd,
a shell loop) restarts it if it dies; its process then ends with it (the end of its stdin), and
the merge waits, paused, until it listens again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path

from cdc.config import Config
from dumper.child_process import stop_child
from dumper.streams.link import LinkRefused, accept, keepalive
from dumper.streams.spawn import spawn_stream

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 15.0


class StreamListener:
    def __init__(self, config: Config, stream: int, host: str, port: int, state_dir: Path):
        """`config`: this host's whole configuration; `state_dir`: where the stream's status
        file goes (`<state_dir>/stream<i>`, as on the merge's host)."""
        self.config = config
        self.stream = stream
        self.host, self.port = host, port
        self.state_dir = state_dir
        self.proc: asyncio.subprocess.Process | None = None
        self.links = 0  # merges that logged in
        self._lock = asyncio.Lock()

    async def run(self) -> None:
        """Until SIGTERM/SIGINT (or cancellation); the stream's process stops with it."""
        server = await asyncio.start_server(self._accept, self.host, self.port)
        log.info("stream %d: waiting for the merge on %s:%d", self.stream, self.host, self.port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            server.close()
            async with self._lock:
                await stop_child(self.proc, STOP_TIMEOUT_S)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            keepalive(writer)
            login = await accept(reader, writer, self.stream, self.config.dumper.stream_secret)
        except (LinkRefused, OSError) as exc:
            log.warning("stream %d: refused a link: %s", self.stream, exc)
            writer.close()
            return
        async with self._lock:
            if self.proc is not None and self.proc.returncode is None:
                log.info(
                    "stream %d: a new merge link: stopping the process of the last", self.stream
                )
            await stop_child(self.proc, STOP_TIMEOUT_S)
            fd = os.dup(writer.get_extra_info("socket").fileno())
            try:
                self.proc = proc = await spawn_stream(
                    self.config,
                    self.stream,
                    login.cluster_uuid,
                    self.state_dir / f"stream{self.stream}",
                    link_fd=fd,
                )
            finally:
                os.close(fd)
                writer.close()  # (our copy: the process holds the link now)
            self.links += 1
            log.info("stream %d: process %d serves a merge link", self.stream, proc.pid)
        with contextlib.suppress(asyncio.CancelledError):
            code = await proc.wait()
            log.info("stream %d: process ended (exit code %s)", self.stream, code)
