"""HA of a multi-stream binlog (docs/streams.md, "HA followers"). In a leading stream's
process: where the leader's term began in this stream, the gate that serves this stream's
consumers only what the followers' copies of it acknowledged (rule 9, per stream), the served
bound its gate stops at while degraded (`BoundRecorder`, recorded by this process in its
stream's row of the term), and until when the merge's lease is sure (`LeaseDeadline`). In a follower: the servers of its stream
copies."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from binlog_writer import BinlogWriter
from cdc.config import Config
from cdc.streams import stream_config, stream_server_uuid
from cdc.tasks import cancel_and_wait
from dumper.ha.copies import save_state_term
from dumper.ha.deps import GmsLeaseStore
from dumper.ha.peers import follower_ack_gate
from dumper.ha.served_bound import BoundRecorder
from dumper.ha.status import ack_status
from dumper.server import AckGate, ServeProcess
from topology import TermStart

log = logging.getLogger(__name__)

# How fast two hosts' monotonic clocks may drift apart at most (NTP slews a clock by at most
# 500 ppm): how much later than the fastest frame's a frame's transit may be counted.
CLOCK_DRIFT = 1e-3


class LeaseDeadline:
    """Until when (this process's monotonic clock) the merge's lease is sure, from its `Sure`
    frames: each says the lease is sure for `sure_ms` after it was sent at `sent_ms` (the
    merge's clock, maybe another host's). A frame that waited on the way (behind batches, or
    while this stream was paused) must not count from when it arrived: its wait is what its
    offset (arrival - sent_ms) exceeds the smallest offset seen, and only the fastest frame's
    transit (on a pipe or a LAN, well under a millisecond) is not counted. The smallest offset
    ages by `CLOCK_DRIFT` a second: clocks that drift apart do not leave it too small for ever.
    Until the first frame, and once frames stop coming, the lease is in doubt (fail safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.until = 0.0
        self._clock = clock
        self._offset: float | None = None  # the smallest (aged) arrival - sent_ms, seconds
        self._at = 0.0  # when `_offset` was last aged

    def heard(self, sent_ms: int, sure_ms: int) -> None:
        now = self._clock()
        sent = sent_ms / 1000
        offset = now - sent
        if self._offset is not None:
            offset = min(offset, self._offset + (now - self._at) * CLOCK_DRIFT)
        self._offset, self._at = offset, now
        self.until = sent + offset + sure_ms / 1000

    def sure(self) -> bool:
        return self._clock() < self.until


async def lead_stream(
    config: Config, stream: int, writer: BinlogWriter, term: int, lease: LeaseDeadline
) -> tuple[AckGate | None, BoundRecorder | None]:
    """Before stream `stream` writes in HA term `term` (its writer opened, its copy recovered):
    record where the term begins in it, as the single stream's leader does (once per term: a
    stream process restarted within the term began where its first start did), and mark the
    copy a prefix of the term. `config`: the stream's own. Returns the gate of its port, which
    gives up waiting for acknowledgements only while `lease` is sure, and the recorder of its
    served bound (to run while it leads: `BoundRecorder.run`)."""
    store = GmsLeaseStore(config)
    start = TermStart(
        term,
        config.dumper.id,
        writer.file,
        4 if writer.recovery.started_new_file else writer.position,
        stream,
    )
    await store.record_term(start)
    save_state_term(writer.dir, term)
    gate = follower_ack_gate(config.dumper, active=lambda: True, sure=lease.sure)
    if gate is None:
        return None, None
    # This process writes the bound itself, as it wrote the term's start: the GMS write is
    # conditional on the lease (the merge's), so nothing needs to pass through the merge, and
    # the merge's loop (the stream's frames) gets no reply to wait for.
    bounds = BoundRecorder(config.dumper, store, gate, stream)
    gate.bound = bounds.current
    return gate, bounds


def stream_status(
    status: Callable[[], dict], term: int, acks: AckGate | None, bounds: BoundRecorder | None
) -> dict:
    """A leading stream's status with its HA part: the term, the followers' acknowledgements,
    the served bound it recorded (if its gate degraded)."""
    out = status()
    ha = {"role": "leader", "term": term, **(ack_status(acks) if acks is not None else {})}
    if bounds is not None and bounds.recorded is not None:
        file, position = bounds.recorded
        ha["served_bound"] = {"file": file, "position": position, "records": bounds.records}
    out["ha"] = ha
    return out


class StreamCopyServers:
    """A multi-stream follower's servers: each stream's copy served read-only on this dumper's
    stream port while it follows, as the single stream's follower serves its copy (with its
    retention). While it leads, its stream processes serve those ports: `stop` before it
    leads, `start` again when it follows."""

    def __init__(self, config: Config, cluster_uuid: str, notify: Callable[[], asyncio.Event]):
        self.config = config
        self.cluster_uuid = cluster_uuid
        self._notify = notify  # set after each copied batch (any stream)
        self.servers: dict[int, ServeProcess] = {}  # by stream
        self._starting: asyncio.Task | None = None

    def start(self) -> None:
        """Start, in the background, the servers not running: starting a process takes
        seconds on a loaded machine, and the follower must go on copying and watching the
        lease meanwhile (a no-op while they start or all run)."""
        if self._starting is not None and not self._starting.done():
            return
        if len(self.servers) < self.config.dumper.streams:
            self._starting = asyncio.create_task(self._start(), name="stream-copy-servers")

    async def _start(self) -> None:
        for i in range(self.config.dumper.streams):
            if i in self.servers:
                continue
            config = stream_config(self.config, i)
            server = ServeProcess(
                config,
                config.dumper.binlog_dir,
                current_notify=self._notify,
                writer_end=lambda: None,  # a copy holds whole transactions only
                leading=lambda: False,
                read_only=lambda: True,
                server_uuid=stream_server_uuid(self.cluster_uuid, i),
            )
            try:
                self.servers[i] = await server.start()
            except (OSError, RuntimeError) as exc:
                # (its port still held): tried again at the follower's next look at the lease
                log.warning("stream %d's copy is not served for now: %s", i, exc)

    async def stop(self) -> None:
        if self._starting is not None:
            await cancel_and_wait([self._starting])
            self._starting = None
        servers, self.servers = self.servers, {}
        for server in servers.values():
            await server.close()
