"""COM_BINLOG_DUMP: validate file/pos, send fake ROTATE + FDE per file, then the file's events byte
for byte, follow the index to the next file, wait on the active file with heartbeats (MySQL's
`Binlog_sender` behaviour, protocol.md §2.7)."""

from __future__ import annotations

import asyncio
import os
import struct
import time
import zlib
from typing import Protocol

from cdc.binlog.constants import HEADER_LEN, HEARTBEAT_EVENT, ROTATE_EVENT, EventFlag
from cdc.binlog.header import HEADER, OFF_FLAGS, OFF_LOG_POS, event_size
from dumper.server.dump.ack_gate import AckGate
from dumper.server.dump.framing import frame_whole_events
from dumper.server.dump.gtid_skip import GtidSkip
from dumper.server.dump.mariadb_until import GtidUntil
from dumper.server.dump.request import (
    ER_MASTER_FATAL_ERROR_READING_BINLOG,
    DumpError,
    DumpOptions,
    DumpRequest,
)
from dumper.server.dump.shared_reads import FramedBatch, SharedReads
from dumper.server.store.binlog_files import (
    MAGIC,
    BinlogFileError,
    BinlogFiles,
    fde_checksum_alg,
)
from dumper.server.store.notifiers import Notifier, PollNotifier

LOG_EVENT_ARTIFICIAL_F = int(EventFlag.ARTIFICIAL)
LOG_EVENT_BINLOG_IN_USE_F = int(EventFlag.BINLOG_IN_USE)
START = len(MAGIC)

# MySQL's texts (clients such as Canal match on them).
MSG_UNKNOWN_FILE = "Could not find first log file name in binary log index file"
MSG_POS_LT_4 = "Client requested master to start replication from position < 4"
MSG_POS_GT_SIZE = "Client requested master to start replication from position > file size"
MSG_CHECKSUM = (
    "Slave can not handle replication events with the checksum that master is configured to log"
)
MSG_TRUNCATED = "binlog truncated in the middle of event; consider out of disk space on master"
MSG_BOGUS = "bogus data in log event"


class PacketSink(Protocol):
    """Where the sender's packets go (the session frames them with consecutive seq ids)."""

    def send(self, payload: bytes) -> None: ...

    @property
    def seq(self) -> int: ...

    def send_framed(self, data: bytes | bytearray, seq: int) -> None: ...

    async def flush(self) -> None: ...


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _event(
    type_code: int, server_id: int, log_pos: int, flags: int, body: bytes, crc: bool
) -> bytes:
    size = HEADER_LEN + len(body) + (4 if crc else 0)
    data = HEADER.pack(0, type_code, server_id, size, log_pos, flags) + body
    return data + struct.pack("<I", zlib.crc32(data)) if crc else data


class BinlogSender:
    """Streams one dump. `run` returns when a non-blocking dump has sent the last event of the
    last file; it raises DumpError for the client and is cancelled when the client goes away."""

    def __init__(
        self,
        files: BinlogFiles,
        sink: PacketSink,
        notifier: Notifier | None = None,
        *,
        server_id: int,
        poll_interval: float = 0.2,
        batch_bytes: int = 256 * 1024,
        gate: AckGate | None = None,
        shared: SharedReads | None = None,
    ) -> None:
        self.files = files
        self.shared = shared  # batches other dumps at the same place read and framed already
        # HA leader: what a follower acknowledged bounds what ordinary dumps get (run() drops
        # it for a follower's own dump).
        self.gate = gate
        self.sink = sink
        self.notifier = notifier or PollNotifier()
        self.server_id = server_id
        self.poll_interval = poll_interval
        self.batch_bytes = batch_bytes
        self.file = ""  # where the stream is (for errors and SHOW PROCESSLIST)
        self.pos = 0
        self.events_sent = 0
        self.bytes_sent = 0  # of binlog events (consumer metrics)
        self.client_server_id = 0  # the dump's server_id (9900 + peer id: an HA follower)
        self.since = time.time()
        # Has it been sent everything it may be sent (it waits for more)? And when it last was:
        # how long a consumer has been behind (`cdc status`, metrics).
        self.caught_up = False
        self.caught_up_at = self.since
        self._rotate_crc = False
        self._skip: GtidSkip | None = None

    async def run(self, request: DumpRequest, options: DumpOptions) -> None:
        self.client_server_id = request.server_id
        name, pos = self._validate(request)
        first = (name, pos)
        # Retention reads `file` from now on: no await between here and the first assignment,
        # so a purge on this loop never removes the file a dump was just validated for.
        self.file, self.pos = name, pos
        if self.gate is not None and self.gate.is_follower(request.server_id):
            self.gate = None
        if request.exclude is not None:
            self._skip = GtidSkip(request.exclude)
        # The first fake ROTATE follows the client's declared algorithm, later ones the
        # algorithm of the FDE just sent (MySQL's m_event_checksum_alg; clients parse them so).
        self._rotate_crc = bool(options.checksum)
        try:
            while True:
                self.file, self.pos = name, pos
                pos, alg = self._send_preamble(name, pos, options)
                await self.sink.flush()
                nxt = await self._stream_file(name, pos, alg, request, options)
                if nxt is None:
                    return
                name, pos = nxt, START
        except DumpError as exc:
            if exc.code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                exc.message += (
                    f"; the first event '{first[0]}' at {first[1]}, the last event read from "
                    f"'./{self.file}' at {self.pos}, the last byte read from './{self.file}' at "
                    f"{self.pos}."
                )
            raise

    # -- validation ----------------------------------------------------------------------------
    def _validate(self, request: DumpRequest) -> tuple[str, int]:
        names = self.files.readable_names()  # an archived file is read as a live one
        if request.file:
            name = self.files.resolve(request.file, archived=True)
        else:
            name = names[0] if names else None
        if name is None:
            raise DumpError(MSG_UNKNOWN_FILE)
        if request.pos < START:
            raise DumpError(MSG_POS_LT_4)
        try:
            size = self.files.size(name)
        except BinlogFileError:
            raise DumpError(MSG_UNKNOWN_FILE) from None
        if request.pos > size:
            raise DumpError(MSG_POS_GT_SIZE)
        if request.pos > START:
            ok, prev, nxt = self.files.boundary_neighbours(name, request.pos)
            if not ok:
                # MySQL would fail later with a misleading max_allowed_packet error; say it.
                raise DumpError(
                    f"Client requested master to start replication from position {request.pos} "
                    f"of '{name}', which is not the start of an event (events start at {prev} "
                    f"and {nxt}); use a position from SHOW BINLOG EVENTS or SHOW MASTER STATUS"
                )
        return name, request.pos

    # -- preamble ------------------------------------------------------------------------------
    def _send_preamble(self, name: str, pos: int, options: DumpOptions) -> tuple[int, int]:
        """Fake ROTATE + FDE (never anything in between); returns (position to go on from, alg)."""
        try:
            fde = self.files.read_fde(name)
        except (BinlogFileError, OSError) as exc:
            raise DumpError(f"Could not open log file: {exc}") from None
        alg = fde_checksum_alg(fde.data)
        if alg and options.checksum is None:
            raise DumpError(MSG_CHECKSUM)
        body = struct.pack("<Q", pos) + name.encode()
        rotate = _event(
            ROTATE_EVENT, self.server_id, 0, LOG_EVENT_ARTIFICIAL_F, body, self._rotate_crc
        )
        self._rotate_crc = alg == 1
        self.sink.send(b"\x00" + rotate)
        data = bytearray(fde.data)
        flags = struct.unpack_from("<H", data, OFF_FLAGS)[0] & ~LOG_EVENT_BINLOG_IN_USE_F
        struct.pack_into("<H", data, OFF_FLAGS, flags)
        if pos > START:  # a mid-file start: the FDE must not move the client's position
            struct.pack_into("<I", data, OFF_LOG_POS, 0)
            struct.pack_into("<I", data, HEADER_LEN + 52, 0)  # created timestamp
        if alg == 1:
            struct.pack_into("<I", data, len(data) - 4, zlib.crc32(data[:-4]))
        self.sink.send(b"\x00" + bytes(data))
        self.events_sent += 2
        return (START + len(fde.data) if pos == START else pos), alg

    # -- streaming -----------------------------------------------------------------------------
    async def _stream_file(
        self, name: str, pos: int, alg: int, request: DumpRequest, options: DumpOptions
    ) -> str | None:
        """Send events of `name` from `pos`; the next file's name, or None (non-blocking end)."""
        try:
            fd = os.open(self.files.path(name), os.O_RDONLY)
        except OSError as exc:
            raise DumpError(f"Could not open log file '{name}': {exc.strerror}") from None
        if self._skip is not None:
            self._skip.new_file()
        path = self.files.path(name)
        try:
            last_sent = time.monotonic()
            blocked_since: float | None = None  # waiting for a follower's acknowledgement
            while True:
                acked = self._acked_limit(name)
                bound = acked
                if request.until is not None:
                    stop, final = request.until.limit(name, path, pos)
                    if final and pos >= stop:
                        self._send_until_reached(request.until, pos, alg)
                        return None
                    bound = _min(acked, stop)
                new = self._send_available(
                    fd, pos, _min(self.notifier.visible_end(name), bound), name
                )
                if new != pos:
                    pos = self.pos = new
                    last_sent = time.monotonic()
                    blocked_since = None
                    self.caught_up = False
                    await self.sink.flush()
                    # A dump catching up on a long backlog into a fast reader never waits in
                    # flush(): one batch per loop turn keeps the other sessions served.
                    await asyncio.sleep(0)
                    continue
                names = self.files.readable_names()
                if name not in names:
                    raise DumpError(f"'{name}' was purged from the index while being sent")
                i = names.index(name)
                rotated = i + 1 < len(names)
                if rotated:
                    # Rotated: the writer finished this file before indexing the next one.
                    new = self._send_available(fd, pos, bound, name)  # a finished file is whole
                    if new != pos:
                        pos = self.pos = new
                        await self.sink.flush()
                        continue
                    size = os.fstat(fd).st_size
                    if acked is None or acked >= size:  # acknowledged whole (or no gate)
                        if size != pos:
                            raise DumpError(MSG_TRUNCATED)
                        return names[i + 1]
                now = time.monotonic()
                self.caught_up, self.caught_up_at = True, time.time()
                # More data, not yet acknowledged by a follower: wait for an acknowledgement
                # (non-blocking dumps too), at most the gate's bound, then serve anyway.
                gated = (
                    acked is not None and pos >= acked and (rotated or os.fstat(fd).st_size > pos)
                )
                if not gated and not request.blocking:
                    return None
                period = options.heartbeat_period
                if period > 0 and now - last_sent >= period:
                    self._send_heartbeat(name, pos, alg)
                    await self.sink.flush()
                    last_sent = now
                    # flush() does not yield while the socket takes the bytes: without this a
                    # tiny period would loop here and starve every other task of the loop.
                    await asyncio.sleep(0)
                    continue
                timeout = self.poll_interval
                if period > 0:
                    timeout = min(timeout, last_sent + period - now)
                if gated:
                    assert self.gate is not None
                    blocked_since = blocked_since or now
                    left = blocked_since + self.gate.wait_s - now
                    if left <= 0 and self.gate.give_up(name, pos, now - blocked_since):
                        continue
                    # (refused while the lease is in doubt: wait on, a poll at a time)
                    await self.gate.wait(max(min(timeout, left if left > 0 else timeout), 0.001))
                    continue
                blocked_since = None
                await self.notifier.wait(max(timeout, 0.001))
        finally:
            os.close(fd)

    def _acked_limit(self, name: str) -> int | None:
        """The gate's limit in `name` (None: none). While the gate is degraded, tells it how
        far this dump got, so that it re-arms only once followers acknowledged that (a
        degraded HA gate limits too: by its served bound)."""
        if self.gate is None:
            return None
        limit = self.gate.limit(name)
        if self.gate.degraded:
            self.gate.served(name, self.pos)
        return limit

    def _send_available(self, fd: int, pos: int, limit: int | None, name: str = "") -> int:
        """Send the whole events present from `pos` (up to about batch_bytes, never past
        `limit`); the new position."""
        want = self.batch_bytes if limit is None else min(self.batch_bytes, limit - pos)
        if want <= 0:
            return pos
        if self._skip is not None:
            new = self._send_skipping(fd, pos, want, limit)
            if not self._skip.done or new != pos:
                return new
            self._skip = None  # past the client's last GTID: the ordinary path from here
        shared = self.shared if name else None
        seq = self.sink.seq
        if shared is not None:
            batch = shared.get(name, pos, seq)
            if (
                batch is not None
                and (limit is None or batch.end <= limit)
                and os.pread(fd, 8, pos) == batch.head
                and os.pread(fd, 8, batch.end - 8) == batch.tail
            ):
                self.sink.send_framed(batch.data, batch.seq)
                self.events_sent += batch.events
                self.bytes_sent += batch.event_bytes
                return batch.end
        data = os.pread(fd, want, pos)
        framed, off, count, after = frame_whole_events(data, seq)
        if not count:
            return self._send_unusual(fd, pos, data, want, limit)
        if shared is not None and off >= 8:
            head, tail = data[:8], data[off - 8 : off]
            batch = FramedBatch(pos + off, framed, after, count, off, head, tail)
            shared.put(name, pos, seq, batch)
        self.sink.send_framed(framed, after)
        self.events_sent += count
        self.bytes_sent += off
        return pos + off

    def _send_skipping(self, fd: int, pos: int, want: int, limit: int | None) -> int:
        """`_send_available` while the client's GTIDs after its first gap are ahead
        (`gtid_skip`): the events not dropped, unshared. The new position."""
        skip = self._skip
        assert skip is not None
        data = os.pread(fd, want, pos)
        keep, used = skip.filter(data)
        if not used and not skip.done and len(data) >= HEADER_LEN:
            size = event_size(data)  # the first event is bigger than a batch (or a packet)
            if size < HEADER_LEN:
                raise DumpError(f"{MSG_BOGUS} (event size {size} at {pos})")
            if limit is not None and pos + size > limit:
                return pos
            whole = os.pread(fd, size, pos) if size > len(data) else data[:size]
            if len(whole) != size:
                return pos  # the rest is not written yet
            keep, used = skip.filter(whole)
            if not used and not skip.done:  # one a packet cannot hold
                return (
                    pos + size
                    if skip.drops(whole)
                    else self._send_unusual(fd, pos, whole, size, limit)
                )
        if keep:
            framed, off, count, after = frame_whole_events(keep, self.sink.seq)
            assert off == len(keep)  # whole events a packet holds (`GtidSkip.filter`)
            self.sink.send_framed(framed, after)
            self.events_sent += count
            self.bytes_sent += off
        return pos + used

    def _send_unusual(self, fd: int, pos: int, data: bytes, want: int, limit: int | None) -> int:
        """The batch at `pos` starts with no event `frame_whole_events` frames: one bigger
        than a batch (or than a packet: split in 16 MB packets), a partial one (wait), or
        damage. The new position."""
        if len(data) < HEADER_LEN:
            return pos
        size = event_size(data)
        if size < HEADER_LEN:
            raise DumpError(f"{MSG_BOGUS} (event size {size} at {pos})")
        whole = data[:size] if size <= len(data) else None
        if whole is None and len(data) == want and (limit is None or pos + size <= limit):
            whole = os.pread(fd, size, pos)
        if whole is None or len(whole) != size:
            return pos  # the rest is not written yet
        self.sink.send(b"\x00" + whole)
        self.events_sent += 1
        self.bytes_sent += size
        return pos + size

    def _send_until_reached(self, until: GtidUntil, pos: int, alg: int) -> None:
        self.sink.send(b"\x00" + until.final_event(self.server_id, pos, alg == 1))
        self.events_sent += 1

    def _send_heartbeat(self, name: str, pos: int, alg: int) -> None:
        # v1 even when flag 0x02 is set: every consumer understands it (protocol.md §2.7).
        self.sink.send(
            b"\x00" + _event(HEARTBEAT_EVENT, self.server_id, pos, 0, name.encode(), alg == 1)
        )
