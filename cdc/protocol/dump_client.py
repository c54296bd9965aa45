"""Binlog dump client for one DN: COM_BINLOG_DUMP over our own asyncio protocol client.

It owns connection, checksum negotiation, CRC verification, reconnect-and-resume and liveness;
it hands out raw event bytes in batches with their binlog coordinates and never decodes rows.
A foundation piece: the MergeSource reads its DN with it, an HA follower the leader's binlog, the
backfill the global binlog. What the handshake says that only MariaDB understands is the DN
flavour's (`cdc.binlog.flavor`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from cdc.binlog.checksum import event_crc, stored_crc
from cdc.binlog.constants import (
    CRC32_RESIDUE,
    FORMAT_DESCRIPTION_EVENT,
    HEADER_LEN,
    HEARTBEAT_EVENT,
    ROTATE_EVENT,
    EventFlag,
)
from cdc.binlog.flavor import MARIADB, MariadbFlavor
from cdc.binlog.header import log_pos as header_log_pos
from cdc.pauses import Backoff
from cdc.protocol.client import READ_SIZE, MysqlClient
from cdc.protocol.constants import BINLOG_DUMP_NON_BLOCK, Command
from cdc.protocol.dump_stream import scan_events, split_events
from cdc.protocol.packets import ERR, MAX_CHUNK, ServerError, is_eof, parse_err

log = logging.getLogger(__name__)

HEADER_FIELDS = struct.Struct("<BxxxxIIH")  # from offset 4: type, event_size, log_pos, flags
MAX_PACKET = 1 << 30
NOT_IN_FILE = frozenset({ROTATE_EVENT, HEARTBEAT_EVENT})  # handled, never handed out
ARTIFICIAL_FLAG = int(EventFlag.ARTIFICIAL)
ROTATE_NAME_AT = HEADER_LEN + 8  # ROTATE: u64 position, then the next file's name
# Errors after which retrying the same request cannot help.
FATAL_CODES = {1236, 1045, 1227, 1044}
RECONNECT_FIRST_S = 0.05  # the first retry after a lost dump, doubled up to max_backoff


class DumpError(RuntimeError):
    """The DN refused or broke the dump in a way a reconnect cannot fix."""


@dataclass(frozen=True, slots=True, order=True)
class BinlogPosition:
    file: str
    pos: int

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@dataclass(slots=True)
class DnEvent:
    """One binlog event as stored on the DN (header + body + CRC), with where it starts."""

    file: str
    pos: int
    data: bytes

    @property
    def type_code(self) -> int:
        return self.data[4]

    @property
    def end(self) -> int:
        return self.pos + len(self.data)


@dataclass(slots=True)
class DumpSettings:
    host: str
    port: int
    user: str
    password: str
    server_id: int  # must be unique per DN among dump clients: MariaDB evicts a duplicate
    name: str = "dn"
    heartbeat_period: float = 1.0
    # No packet (not even a heartbeat) for this long: the connection is considered dead.
    idle_timeout: float = 10.0
    reconnect: bool = True
    max_backoff: float = 2.0
    verify_checksum: bool = True
    # Hand out the real ROTATE at the end of each file too (a byte-for-byte copy needs it).
    keep_rotate: bool = False
    # End at the server's current end (BINLOG_DUMP_NON_BLOCK: it sends EOF there) instead of
    # waiting for more: a one-off copy (`cdc ha reseed`).
    non_blocking: bool = False
    # The server's dialect of the dump handshake.
    flavor: MariadbFlavor = field(default=MARIADB)


class DumpClient:
    def __init__(self, settings: DumpSettings, start: BinlogPosition):
        self.settings = settings
        self.position = start  # end of the last event handed out: where a resume starts
        self.last_packet_at = 0.0
        self.connected = False
        self.reconnects = 0
        self._client: MysqlClient | None = None

    def where(self, at: BinlogPosition | None = None) -> str:
        s = self.settings
        return f"{s.name} ({s.host}:{s.port}) at {at or self.position}"

    async def _open(self) -> MysqlClient:
        s = self.settings
        client = await MysqlClient.connect(s.host, s.port, s.user, s.password)
        try:
            for statement in s.flavor.dump_session_statements(s.heartbeat_period):
                await client.query(statement)
            flags = s.flavor.dump_flags | (BINLOG_DUMP_NON_BLOCK if s.non_blocking else 0)
            body = struct.pack("<IHI", self.position.pos, flags, s.server_id)
            await client.send_command(Command.BINLOG_DUMP, body + self.position.file.encode())
        except BaseException:
            client.close()
            raise
        return client

    async def batches(self) -> AsyncIterator[list[DnEvent]]:
        """Yield batches of events, forever; reconnects and resumes on connection loss."""
        async for file, events in self.raw_batches():
            yield [DnEvent(file, event_pos(e), e) for e in events]

    async def raw_batches(self, packed: bool = False) -> AsyncIterator[tuple[str, list]]:
        """`batches` without an object per event: (file, the events' bytes), every event of a
        batch in that one file; an event's position is `event_pos(data)`. The MergeSource's
        hot path. `packed`: the plain events stay in the packets they came in, a batch's list
        holds `(data, start, stop)` for each run of them (complete packets of plain events,
        `merge_source/packets.py`) and the bytes of any other event (no bytes per event: a
        MergeSource process's read)."""
        backoff = Backoff(RECONNECT_FIRST_S, self.settings.max_backoff)
        lost_at: float | None = None  # a DN away: logged when lost and when back, not per try
        while True:
            try:
                self._client = await self._open()
                self.connected = True
                backoff.reset()
                if lost_at is not None:
                    log.warning(
                        "%s: reconnected after %.1fs", self.where(), time.monotonic() - lost_at
                    )
                    lost_at = None
                async for batch in self._read(self._client, packed):
                    yield batch
                return  # server sent EOF: only happens for a non-blocking dump
            except ServerError as exc:
                if exc.code in FATAL_CODES or not self.settings.reconnect:
                    raise DumpError(f"{self.where()}: DN refused the binlog dump: {exc}") from None
                lost = f"{exc}"
            except (ConnectionError, OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                if not self.settings.reconnect:
                    raise DumpError(f"{self.where()}: connection lost: {exc!r}") from None
                lost = f"connection lost ({exc!r})"
            finally:
                self.connected = False
                if self._client is not None:
                    self._client.close()
                    self._client = None
            delay = backoff.next()
            if lost_at is None:
                lost_at = time.monotonic()
                log.warning("%s: %s; reconnecting (retried with backoff)", self.where(), lost)
            else:
                log.debug("%s: %s; reconnecting in %.2fs", self.where(), lost, delay)
            self.reconnects += 1
            await asyncio.sleep(delay)

    async def _receive(self, client: MysqlClient, data: bytes, need: int) -> bytes:
        """`data` followed by what arrives next: at least one read, and at least `need` bytes
        (a packet known to be that long is read whole before anyone walks it again)."""
        parts, have = [data], len(data)
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that lands as
            # the read completes, and a cancelled pipeline then never stops.
            async with asyncio.timeout(self.settings.idle_timeout):
                chunk = await client.read_raw(max(READ_SIZE, need - have))
            self.last_packet_at = time.monotonic()
            parts.append(chunk)
            have += len(chunk)
            if have >= need:
                return b"".join(parts) if len(parts) > 2 or data else chunk

    async def _read(
        self, client: MysqlClient, packed: bool = False
    ) -> AsyncIterator[tuple[str, list]]:
        s = self.settings
        file = self.position.file
        verify = s.verify_checksum
        data, pos, need = b"", 0, 0
        while True:
            data = await self._receive(client, data[pos:], need)
            pos = 0
            batch: list[bytes] = []
            end = self.position.pos  # where the batch ends: the position once it is yielded
            while True:
                # The fast loop takes every plain event; it stops at anything else, handled here.
                if packed:
                    stop, last = scan_events(data, pos, verify)
                    if stop > pos:
                        batch.append((data, pos, stop))
                        pos, end = stop, last
                else:
                    events, pos = split_events(data, pos, verify)
                    if events:
                        batch += events
                        end = header_log_pos(events[-1])
                packet, pos, need = take_packet(data, pos)
                if packet is None:
                    break  # the rest has not arrived yet
                if packet[0] != 0:
                    if packet[0] == ERR:
                        raise parse_err(packet)
                    if is_eof(packet):
                        if batch:
                            self.position = BinlogPosition(file, end)
                            yield file, batch
                        return
                    raise DumpError(
                        f"{self.where()}: unexpected packet 0x{packet[0]:02x} in dump stream"
                    )
                event = packet[1:]
                # Errors name the bad event's own start: the end of the one before it (`end`),
                # not its log_pos, which may be part of the damage.
                if len(event) < HEADER_LEN:
                    raise DumpError(
                        f"{self.where(BinlogPosition(file, end))}: truncated event header "
                        f"({len(event)} bytes)"
                    )
                type_code, size, log_pos, flags = HEADER_FIELDS.unpack_from(event, 4)
                if size != len(event):
                    raise DumpError(
                        f"{self.where(BinlogPosition(file, end))}: event size {size} != packet "
                        f"size {len(event)}"
                    )
                if verify and zlib.crc32(event) != CRC32_RESIDUE:
                    # An FDE's CRC is computed with the in-use flag cleared (the codec's rule).
                    if type_code != FORMAT_DESCRIPTION_EVENT or event_crc(event) != stored_crc(
                        event
                    ):
                        raise DumpError(
                            f"{self.where(BinlogPosition(file, end))}: event type {type_code} "
                            "failed its CRC32 check"
                        )
                if type_code not in NOT_IN_FILE and log_pos:
                    batch.append(event)  # a plain event the fast loop left: a 16 MB one, an FDE
                    end = log_pos
                elif type_code == ROTATE_EVENT:
                    # Fake (artificial) or real: either way the stream continues in that file.
                    if s.keep_rotate and log_pos and not flags & ARTIFICIAL_FLAG:
                        batch.append(event)
                        end = log_pos
                    if batch:  # a batch holds events of one file
                        self.position = BinlogPosition(file, end)
                        yield file, batch
                        batch = []
                    file = bytes(event[ROTATE_NAME_AT:-4]).decode()
                    if flags & ARTIFICIAL_FLAG:
                        end = struct.unpack_from("<Q", event, HEADER_LEN)[0]
                        self.position = BinlogPosition(file, end)
                elif type_code == FORMAT_DESCRIPTION_EVENT:
                    # A re-sent FDE at a mid-file start: not part of the file.
                    batch.append(event)
            if batch:
                # Set only now: a batch that fails half-way is re-read whole after a reconnect.
                self.position = BinlogPosition(file, end)
                yield file, batch

    async def close(self) -> None:
        if self._client is not None:
            await self._client.quit()

    def reply(self, payload: bytes) -> None:
        """Send `payload` to the server during the dump (an HA follower's semi-sync style
        acknowledgement, sequence id 0 as MySQL's); dropped while not connected."""
        if self._client is not None:
            self._client.write_packet(payload, seq=0)


def event_pos(event: bytes) -> int:
    """Where a dumped event starts in its file (a re-sent FDE, log_pos 0, stands at 4)."""
    log_pos = header_log_pos(event)
    return log_pos - len(event) if log_pos else 4


def take_packet(data: bytes, pos: int) -> tuple[bytes | None, int, int]:
    """The payload of the packet at `pos` (split packets joined) and the offset after it; or
    (None, pos, bytes needed from pos) when it has not fully arrived."""
    parts, p, end = [], pos, len(data)
    while True:
        if end - p < 4:
            return None, pos, p + 4 - pos
        length = int.from_bytes(data[p : p + 3], "little")
        if end - p - 4 < length:
            if p + 4 + length - pos > MAX_PACKET:
                raise DumpError(f"a dump packet of more than {MAX_PACKET} bytes")
            return None, pos, p + 4 + length - pos
        parts.append(data[p + 4 : p + 4 + length])
        p += 4 + length
        if length < MAX_CHUNK:
            return (parts[0] if len(parts) == 1 else b"".join(parts)), p, 0
