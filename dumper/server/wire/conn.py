"""A client connection's packets: reads that check sequence ids, size and timeouts (MySQL's
my_net_read), writes collected and flushed with back-pressure, and the errors that end a
connection. Knows nothing of commands (`session.py`) or what answers them."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import struct
import termios
import time
from collections.abc import Callable

from cdc.protocol.constants import Capability as Cap
from cdc.protocol.packets import MAX_CHUNK, err_packet, frame

# Rows (or skipped events) of a streamed result set per loop turn: ~1 ms of work.
ROWS_PER_TURN = 64
# Rows of a result read from elsewhere (snapshot reads), framed in one pass, per write: ~64 kB.
ROWS_PER_WRITE = 512
# Rows framed already (a snapshot read's chunk, `cdc.protocol.framed_rows`) per write: big
# writes, fewer wake-ups; about what a read of the DN's socket brings.
BYTES_PER_WRITE = 1 << 18
ER_NET_PACKET_TOO_LARGE = 1153
ER_NET_PACKETS_OUT_OF_ORDER = 1156
ER_NET_READ_INTERRUPTED = 1159
# A blocked flush looks at the client's progress this many times per write timeout.
WRITE_CHECKS = 4

log = logging.getLogger(__name__)


class Closed(Exception):
    """The peer went away (or sent something that ends the connection)."""


class Idle(Exception):
    """No command came within the session's wait_timeout."""


class Fatal(Exception):
    """A framing error MySQL answers with an ERR and then closes the connection."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class Conn:
    """The packet layer of one connection; `reader`/`writer` become a TlsStream after an SSL
    request. `read_timeout` gives the session's net_read_timeout at each read."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_allowed_packet: int,
        read_timeout: Callable[[], float],
        write_timeout: float | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.max_allowed_packet = max_allowed_packet
        self._read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.client_caps = 0
        self._seq = 0
        self._out: list[bytes] = []

    async def read_packet(self, limit: int | None = None, idle: float | None = None) -> bytes:
        """One (possibly multi-packet) client payload, reading not a byte beyond it (after an SSL
        request the next bytes are the TLS handshake, which must stay in the stream). Like
        MySQL's my_net_read: each packet must carry the expected sequence id (ER 1156), and a
        payload longer than `limit` (default the session's max_allowed_packet) is refused (ER
        1153) from its header, before its bytes are read. The first byte may take `idle`
        seconds (Idle after that; None = no bound); once a command has begun, each further
        read gets net_read_timeout (ER 1159), so a half-sent packet cannot hold a connection."""
        if limit is None:
            limit = self.max_allowed_packet
        parts: list[bytes] = []
        total = 0
        while True:
            if not parts and idle is not None:
                try:
                    async with asyncio.timeout(idle):
                        header = await self.reader.readexactly(1)
                except TimeoutError:
                    raise Idle() from None
                except asyncio.IncompleteReadError:
                    raise Closed() from None
                header += await self._read_more(3)
            else:
                header = await self._read_more(4)
            length = int.from_bytes(header[:3], "little")
            if header[3] != self._seq:
                raise Fatal(ER_NET_PACKETS_OUT_OF_ORDER, "Got packets out of order")
            self._seq = (self._seq + 1) & 0xFF
            total += length
            if total > limit:
                raise Fatal(
                    ER_NET_PACKET_TOO_LARGE, "Got a packet bigger than 'max_allowed_packet' bytes"
                )
            parts.append(await self._read_more(length))
            if length < MAX_CHUNK:
                return parts[0] if len(parts) == 1 else b"".join(parts)

    async def _read_more(self, n: int) -> bytes:
        """`n` bytes of a command already begun, within the session's net_read_timeout."""
        try:
            async with asyncio.timeout(self._read_timeout()):  # no task per read (wait_for)
                return await self.reader.readexactly(n)
        except TimeoutError:
            raise Fatal(
                ER_NET_READ_INTERRUPTED, "Got timeout reading communication packets"
            ) from None
        except asyncio.IncompleteReadError:
            raise Closed() from None

    async def read_some(self, n: int) -> bytes:
        """Whatever the client sent, up to `n` bytes (b"" at its end): a dump's input."""
        return await self.reader.read(n)

    def new_command(self) -> None:
        """Every command starts a new sequence."""
        self._seq = 0

    def send(self, payload: bytes) -> None:
        data, self._seq = frame(payload, self._seq)
        self._out.append(data)

    def send_error(self, code: int, message: str, state: str = "HY000") -> None:
        self.send(err_packet(code, message, state))

    @property
    def seq(self) -> int:
        """The sequence id of the next packet."""
        return self._seq

    @property
    def pending(self) -> int:
        """Packets sent but not flushed yet."""
        return len(self._out)

    def discard(self) -> None:
        """Drop what is not flushed yet (a fatal error replaces it)."""
        self._out.clear()

    def send_framed(self, data: bytes | bytearray, seq: int) -> None:
        """Packets framed already (a batch shared by several dumps), `seq` the id after them."""
        self._out.append(data)
        self._seq = seq

    async def flush(self) -> None:
        out = self._out
        if out:
            # A shared batch alone is written as it is: no copy per consumer.
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
        transport = getattr(self.writer, "transport", None)
        if self.write_timeout is None or transport is None or not transport.get_write_buffer_size():
            await self.writer.drain()  # (nothing buffered: it returns at once, no timer made)
            return
        await self._drain_or_close(transport, self.write_timeout)

    async def _drain_or_close(self, transport: asyncio.WriteTransport, timeout: float) -> None:
        """drain(), but a client that took none of what was sent for `timeout` seconds is cut
        off (ConnectionAbortedError: a dump ends as on any lost client): MySQL's
        net_write_timeout. TCP_USER_TIMEOUT (cdc/sockets.py) ends a
        connection whose data stays unacknowledged only when a retransmission timer fires,
        and the first one waits out the link's RTO, which a slow, deep-queued path makes
        long (a consumer behind a rate-limited link, then cut: its session held its files
        from purge for over a minute). A slow client that still acknowledges bytes is not
        ended, even while the socket stays too full to take more from us (the kernel makes
        it writable again only once much of its queue has gone)."""
        left = _unacknowledged(transport)
        progress_at = time.monotonic()
        while True:
            try:
                async with asyncio.timeout(timeout / WRITE_CHECKS):
                    await self.writer.drain()
                return
            except TimeoutError:
                if transport.is_closing():
                    raise  # the kernel's ETIMEDOUT, or closed meanwhile
            now = _unacknowledged(transport)
            if now < left:
                left, progress_at = now, time.monotonic()
            elif time.monotonic() - progress_at >= timeout:
                log.info(
                    "a client took nothing of %d bytes sent to it for %g s "
                    "(client_timeout_s): connection closed",
                    now,
                    timeout,
                )
                transport.abort()
                raise ConnectionAbortedError(f"the client took nothing for {timeout:g} s")

    @property
    def deprecate_eof(self) -> bool:
        return bool(self.client_caps & Cap.DEPRECATE_EOF)


def _unacknowledged(transport: asyncio.WriteTransport) -> int:
    """Bytes written and not yet acknowledged by the client: in the transport's buffer and in
    the kernel's send queue (SIOCOUTQ: unsent + unacknowledged; 0 where unknown)."""
    n = transport.get_write_buffer_size()
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            n += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        except (OSError, ValueError):  # not a TCP socket, closed meanwhile
            pass
    return n
