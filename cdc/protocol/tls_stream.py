"""TLS over an asyncio stream pair that already carries plaintext: MySQL's in-band upgrade (an
SSL request packet, then the TLS handshake on the same connection).

Not `StreamWriter.start_tls`: on Python 3.11 whatever the client sent right after its SSL
request and already sits in the StreamReader's buffer (the ClientHello, often in the same TCP
segment) never reaches the TLS layer, and the handshake hangs until the server's handshake
timeout — about every other connection on a loaded machine. Here TLS records are read from the
same StreamReader, so no byte is lost; encryption runs in an `ssl.SSLObject` over memory BIOs.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

READ_SIZE = 65536


class TlsStream:
    """Reader and writer in one (the subset of StreamReader/StreamWriter the dumper's session
    uses). `await handshake()` first."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        context: ssl.SSLContext,
        *,
        server_side: bool = True,
    ) -> None:
        self._reader, self._writer = reader, writer
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side)
        self._plain = bytearray()  # decrypted, not yet returned by readexactly
        self._eof = False

    async def handshake(self) -> None:
        """Raises ssl.SSLError on a failed handshake, ConnectionError if the peer goes away."""
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._send_pending()
                if not await self._receive():
                    raise ConnectionResetError(
                        "connection closed during the TLS handshake"
                    ) from None
        await self._send_pending()  # the last flight (and TLS 1.3 session tickets)

    # -- reading -------------------------------------------------------------------------------
    async def _receive(self) -> bool:
        """Feed the next TLS records from the socket; False at EOF."""
        if self._eof:
            return False
        data = await self._reader.read(READ_SIZE)
        if not data:
            self._eof = True
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    async def _decrypt(self, size: int) -> bytes:
        """Up to `size` plaintext bytes; b"" at the end of the stream."""
        while True:
            try:
                return self._ssl.read(size)
            except ssl.SSLWantReadError:
                if not await self._receive():
                    return b""
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""

    async def read(self, n: int = -1) -> bytes:
        size = n if n > 0 else READ_SIZE
        if self._plain:
            out = bytes(self._plain[:size])
            del self._plain[:size]
            return out
        return await self._decrypt(size)

    async def readexactly(self, n: int) -> bytes:
        while len(self._plain) < n:
            data = await self._decrypt(max(READ_SIZE, n - len(self._plain)))
            if not data:
                partial = bytes(self._plain)
                self._plain.clear()
                raise asyncio.IncompleteReadError(partial, n)
            self._plain += data
        out = bytes(self._plain[:n])
        del self._plain[:n]
        return out

    # -- writing -------------------------------------------------------------------------------
    @property
    def transport(self) -> asyncio.BaseTransport:
        """The TCP connection's (what is buffered there, abort)."""
        return self._writer.transport

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = self._ssl.write(view)
            view = view[written:]
        self._writer.write(self._outgoing.read())

    async def _send_pending(self) -> None:
        pending = self._outgoing.read()
        if pending:
            self._writer.write(pending)
            await self._writer.drain()

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()

    def is_closing(self) -> bool:
        return self._writer.is_closing()

    async def wait_closed(self) -> None:
        await self._writer.wait_closed()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._ssl
        if name == "cipher":
            return self._ssl.cipher()
        return self._writer.get_extra_info(name, default)
