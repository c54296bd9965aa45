"""A stream's TCP link (docs/streams.md, "A stream on another host"): the same frames as on a
local stream's pipes, after a handshake in which both ends prove they hold `[dumper]
stream_secret` (HMAC-SHA256 over fresh nonces of both: the secret never crosses the wire, and
a recorded handshake cannot be replayed). Here: the handshake of each end and the merge's
`connect`; the listener that runs a stream for each merge that logs in is `listener.py`.

The link is authenticated, not encrypted: a deployment across hosts puts it on a private
network or in a TLS tunnel."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
from typing import TypeVar

from google.protobuf.message import Message

from cdc.frames import FRAME
from cdc.sockets import bound_stream
from dumper.streams.frames_pb2 import Challenge, Login, Welcome
from dumper.streams.wire import WireError, framed, read_frame

M = TypeVar("M", bound=Message)

NONCE_BYTES = 32
HANDSHAKE_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 5.0
LINK_DEAD_S = 50.0  # 20 s idle + 30 s of silence: as the link's keepalives were before
READ_LIMIT = 1 << 20  # a frame reader's buffer, on a link as on a stream's local pipes


class LinkRefused(RuntimeError):
    """The other end is not the stream (or the merge) it should be: another stream, another
    secret, or not a stream link at all."""


def keepalive(writer: asyncio.StreamWriter) -> None:
    """A link whose other host vanished (no FIN, no RST) ends within about a minute instead of
    waiting for ever (`cdc.sockets`: keepalives, and unacknowledged data bounded too)."""
    bound_stream(writer, dead_s=LINK_DEAD_S, idle_s=20)


def _proof(secret: str, *parts: bytes) -> bytes:
    # each part length-prefixed: no two different sequences of parts give the same message
    message = b"".join(FRAME.pack(len(p)) + p for p in parts)
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


def _merge_proof(secret: str, challenge: Challenge, login: Login) -> bytes:
    return _proof(
        secret,
        b"merge",
        challenge.nonce,
        str(login.stream).encode(),
        login.cluster_uuid.encode(),
        login.nonce,
    )


async def _read(reader: asyncio.StreamReader, cls: type[M], peer: str) -> M:
    try:
        message = await asyncio.wait_for(read_frame(reader, cls), HANDSHAKE_TIMEOUT_S)
    except WireError as exc:
        raise LinkRefused(f"{peer}: not a stream link ({exc})") from None
    except TimeoutError:
        raise LinkRefused(f"{peer}: no {cls.__name__} in {HANDSHAKE_TIMEOUT_S}s") from None
    if message is None:
        raise LinkRefused(f"{peer}: closed the link during the handshake")
    return message


async def connect(
    host: str, port: int, stream: int, cluster_uuid: str, secret: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The merge's end: a logged-in link to stream `stream`'s listener. Raises OSError or
    TimeoutError (not reachable) or LinkRefused."""
    peer = f"stream {stream} at {host}:{port}"
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, limit=READ_LIMIT), CONNECT_TIMEOUT_S
    )
    try:
        keepalive(writer)
        challenge = await _read(reader, Challenge, peer)
        if challenge.stream != stream:
            raise LinkRefused(f"{peer}: it serves stream {challenge.stream}")
        login = Login(nonce=os.urandom(NONCE_BYTES), stream=stream, cluster_uuid=cluster_uuid)
        login.proof = _merge_proof(secret, challenge, login)
        writer.write(framed(login))
        await writer.drain()
        welcome = await _read(reader, Welcome, peer)
        if welcome.error:
            raise LinkRefused(f"{peer}: refused the login: {welcome.error}")
        if not hmac.compare_digest(
            welcome.proof, _proof(secret, b"stream", login.nonce, challenge.nonce)
        ):
            raise LinkRefused(f"{peer}: it does not hold [dumper] stream_secret")
    except BaseException:
        writer.close()
        raise
    return reader, writer


async def accept(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: int, secret: str
) -> Login:
    """The stream's end: the merge's login, checked and welcomed. Nothing more is read from
    the link here (what follows is the stream process's to read: reading is paused)."""
    peer = "merge at {}:{}".format(*(writer.get_extra_info("peername") or ("?", 0))[:2])
    challenge = Challenge(nonce=os.urandom(NONCE_BYTES), stream=stream)
    writer.write(framed(challenge))
    await writer.drain()
    login = await _read(reader, Login, peer)
    if login.stream != stream:
        error = f"this is stream {stream}, not {login.stream}"
    elif not hmac.compare_digest(login.proof, _merge_proof(secret, challenge, login)):
        error = "wrong proof (not the [dumper] stream_secret)"
    else:
        error = ""
    if error:
        writer.write(framed(Welcome(error=error)))
        await writer.drain()
        raise LinkRefused(f"{peer}: {error}")
    writer.transport.pause_reading()
    writer.write(framed(Welcome(proof=_proof(secret, b"stream", login.nonce, challenge.nonce))))
    await writer.drain()
    return login
