"""Administrative SQL connections: the one client stack (PyMySQL) every stage and tool uses to
run plain statements on the GMS, a DN or a dumper (metadata, `SHOW BINARY LOGS`, a backfill's
reads, the demo), with bounded waits and the retry policy for a dependency that went away
(docs/faults.md).

Two other MySQL clients exist, each for what this one cannot do: `cdc.protocol`'s dump client
speaks COM_BINLOG_DUMP (PyMySQL has no replication protocol), and the CN protocol's
`DnConnection` (`cdc/cn_protocol/dn_conn.py`) is asyncio-native for the commit path's XA
round trips (PyMySQL blocks a thread per statement)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable
from typing import TypeVar

import pymysql
import pymysql.connections

from cdc.pauses import GMS, Backoff, Pauses
from cdc.sockets import bound_dead_peer

T = TypeVar("T")

CONNECT_TIMEOUT_S = 5
# A server that stopped answering (SIGSTOP, a network partition) ends a statement after this
# long instead of holding its thread for ever; every administrative statement is short.
READ_TIMEOUT_S = 30

# What a server that is away (down, restarting, unreachable, stopped) raises: a retry may cure it.
UNREACHABLE = (
    pymysql.err.OperationalError,
    pymysql.err.InterfaceError,
    ConnectionError,
    TimeoutError,
)


class _Connection(pymysql.connections.Connection):
    """PyMySQL's connection with a cheaper TLS context for its default. Given no TLS options,
    PyMySQL (1.2) tries TLS where the server offers it ("preferred") with a context from
    `ssl.create_default_context`, which loads the system's CA bundle (~35 ms of CPU per
    connection; the leader opens several per pipeline start: the GMS, the meta DB, each DN's
    `SHOW BINARY LOGS`) and then sets it to verify nothing (CERT_NONE, no hostname check). The
    same context without the CA bundle it never reads costs ~0.4 ms. Explicit TLS options get
    PyMySQL's own context."""

    def _create_ssl_ctx(self, sslp):
        if sslp:
            return super()._create_ssl_ctx(sslp)
        return preferred_tls_context()


def preferred_tls_context() -> ssl.SSLContext:
    """What PyMySQL's `_create_ssl_ctx({})` makes (a client context, TLS 1.2+, no certificate
    or hostname check, VERIFY_X509_STRICT off), without loading CA certificates: with
    CERT_NONE they are never consulted."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return ctx


def connect(
    host: str,
    port: int,
    user: str,
    password: str,
    database: str | None = None,
    *,
    autocommit: bool = True,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    read_timeout: float | None = READ_TIMEOUT_S,
    **options,
) -> pymysql.Connection:
    """A PyMySQL connection, utf8mb4, in autocommit unless asked, with bounded waits (a
    caller whose statements may run long, a backfill's reads and loads, passes
    `read_timeout=None`); `options` go to `pymysql.connect` (e.g. `init_command`)."""
    conn = _Connection(
        host=host,
        port=port,
        user=user,
        password=password,
        database=database,
        autocommit=autocommit,
        charset="utf8mb4",
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        write_timeout=read_timeout,
        **options,
    )
    # Also bounded where `read_timeout` is None: a cut link ends the connection (cdc/sockets.py).
    bound_dead_peer(getattr(conn, "_sock", None))
    return conn


def close_now(conn: pymysql.Connection) -> None:
    """Close `conn` at once, even while another thread is blocked reading it: PyMySQL's close
    waits for that read, for as long as a cut-off GMS stays silent (seen: a fenced leader's
    loop frozen in `close` for the whole partition). Shutting the socket down first ends the
    read."""
    sock = getattr(conn, "_sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        conn.close()


def retry(
    call: Callable[[], T],
    what: str,
    pauses: Pauses,
    *,
    reason: str = GMS,
    stop: threading.Event | None = None,
    on_error: Callable[[], None] | None = None,
) -> T:
    """`call()` until it does not fail for an unreachable server (blocking: run it in a worker
    thread). Meanwhile `reason` is paused in `pauses` with `what` and the error; `on_error`
    runs after each failure (drop a broken connection); a set `stop` ends the wait by raising
    the last error."""
    backoff = Backoff()
    waited = False
    while True:
        try:
            result = call()
        except UNREACHABLE as exc:
            if on_error is not None:
                on_error()
            if stop is not None and stop.is_set():
                raise
            pauses.begin(reason, f"{what}: {exc}")
            waited = True
            (stop or threading.Event()).wait(backoff.next())  # a set `stop` cuts the wait
            continue
        if waited:
            pauses.end(reason)
        return result
