"""A TCP connection whose other end vanished without a word (a cut link, a host gone: no FIN, no
RST) must end within a bound, whatever its owner is doing with it: waiting for an answer, for a
quiet peer's next byte, or for its own bytes to be taken (docs/faults.md, "Partitions").

Two kernel mechanisms together: keepalive probes after `idle_s` of silence, and
TCP_USER_TIMEOUT, which ends the connection once sent data (a request, a probe) stayed
unacknowledged for `dead_s`. A live peer acknowledges probes while it works on a long
statement, so a slow answer is never taken for a dead link."""

from __future__ import annotations

import asyncio
import socket

# Our own connections to the DNs and the GMS (the CN protocol, MergeSource dumps, HA copies,
# administrative SQL): a cut link ends them within about DEAD_PEER_S + PEER_IDLE_S.
DEAD_PEER_S = 10.0
PEER_IDLE_S = 2.0


def bound_dead_peer(
    sock: socket.socket | None, dead_s: float = DEAD_PEER_S, idle_s: float = PEER_IDLE_S
) -> None:
    """End `sock` once its peer was silent to probes, or left data unacknowledged, for `dead_s`
    (Linux; elsewhere only keepalives with the system's timing). No-op for a non-TCP socket."""
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    options = (
        ("TCP_KEEPIDLE", max(1, int(idle_s))),
        ("TCP_KEEPINTVL", 1),
        ("TCP_KEEPCNT", max(1, int(dead_s))),
        ("TCP_USER_TIMEOUT", int(dead_s * 1000)),
    )
    for name, value in options:
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def bound_stream(
    writer: asyncio.StreamWriter, dead_s: float = DEAD_PEER_S, idle_s: float = PEER_IDLE_S
) -> None:
    """`bound_dead_peer` for an asyncio stream's socket."""
    bound_dead_peer(writer.get_extra_info("socket"), dead_s, idle_s)
