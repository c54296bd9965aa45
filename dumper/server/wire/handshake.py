"""Connection phase: the v10 greeting, the handshake response (and an SSL request's upgrade to
TLS), authentication (mysql_native_password, the caching_sha2 fast path, an auth switch), and
the connection limits MySQL checks at login."""

from __future__ import annotations

import logging
import os
import ssl
import struct

from cdc.config import DumperConfig, DumperUser
from cdc.protocol import auth
from cdc.protocol.constants import Capability as Cap
from cdc.protocol.constants import Status
from cdc.protocol.packets import ProtocolError, ok_packet, read_lenenc_str, read_nul_str
from cdc.protocol.tls_stream import TlsStream
from dumper.server.sessions import SessionState, account
from dumper.server.users import has_any, verify_caching_sha2, verify_native
from dumper.server.wire.conn import Conn
from dumper.server.wire.context import WireContext

log = logging.getLogger(__name__)

SERVER_CAPABILITIES = (
    Cap.LONG_PASSWORD
    | Cap.FOUND_ROWS
    | Cap.LONG_FLAG
    | Cap.CONNECT_WITH_DB
    | Cap.PROTOCOL_41
    | Cap.INTERACTIVE
    | Cap.TRANSACTIONS
    | Cap.SECURE_CONNECTION
    | Cap.MULTI_STATEMENTS
    | Cap.MULTI_RESULTS
    | Cap.PS_MULTI_RESULTS
    | Cap.PLUGIN_AUTH
    | Cap.CONNECT_ATTRS
    | Cap.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | Cap.DEPRECATE_EOF
)
CHARSET_UTF8MB4_GENERAL_CI = 45
# Before login a packet is the handshake response (or an auth switch reply): MySQL caps its
# connection attributes at 64 KiB, so anything much larger is an attack on memory, refused
# before it is buffered.
MAX_HANDSHAKE_PACKET = 128 << 10


async def handshake(conn: Conn, ctx: WireContext, state: SessionState) -> bool:
    """Greet, read the response (upgrading to TLS on an SSL request), authenticate; True when
    the client is logged in (`state.user` set, the OK sent), False when refused (the ERR sent)."""
    salt = bytes(b % 127 + 1 for b in os.urandom(20))  # printable-ish, no NUL (like MySQL)
    caps = int(SERVER_CAPABILITIES) | (Cap.SSL if ctx.tls is not None else 0)
    greeting = (
        b"\x0a"
        + handshake_version(ctx.config).encode()
        + b"\0"
        + struct.pack("<I", state.conn_id)
        + salt[:8]
        + b"\0"
        + struct.pack(
            "<HBHHB",
            caps & 0xFFFF,
            CHARSET_UTF8MB4_GENERAL_CI,
            Status.AUTOCOMMIT,
            caps >> 16,
            21,
        )
        + bytes(10)
        + salt[8:]
        + b"\0"
        + auth.NATIVE.encode()
        + b"\0"
    )
    conn.new_command()
    conn.send(greeting)
    await conn.flush()
    payload = await conn.read_packet(MAX_HANDSHAKE_PACKET)
    try:
        name, response, plugin = _parse_response(conn, state, payload)
    except (ProtocolError, IndexError, struct.error, UnicodeDecodeError):
        conn.send_error(1043, "Bad handshake", "08S01")
        await conn.flush()
        return False
    if name is None:  # SSL request: upgrade, then the real response comes encrypted
        if ctx.tls is None:
            conn.send_error(1043, "SSL is not supported by the binlog server", "08S01")
            await conn.flush()
            return False
        try:
            tls = TlsStream(conn.reader, conn.writer, ctx.tls)
            await tls.handshake()
            conn.reader = conn.writer = tls  # type: ignore[assignment]
            payload = await conn.read_packet(MAX_HANDSHAKE_PACKET)
            name, response, plugin = _parse_response(conn, state, payload)
        except (
            ssl.SSLError,
            OSError,
            ProtocolError,
            IndexError,
            struct.error,
            UnicodeDecodeError,
        ) as exc:
            log.info("%s: TLS handshake failed: %s", state.host, exc)
            return False
        if name is None:
            return False
    user = account(ctx.config, name)
    # An unknown user goes through the same steps as a known one with a wrong password
    # (same packets, same order, then 1045): nothing tells them apart (no enumeration).
    ok, response = await _authenticate(conn, user or _nobody(name), plugin, salt, response)
    ok = ok and user is not None
    if not ok:
        using = "YES" if response else "NO"
        conn.send_error(
            1045,
            f"Access denied for user '{name}'@'{state.host}' (using password: {using})",
            "28000",
        )
        await conn.flush()
        return False
    if len(ctx.sessions.live) > ctx.config.max_connections and not has_any(
        user, "SUPER", "CONNECTION ADMIN"
    ):  # the one slot beyond max_connections is kept for an administrator, as in MySQL
        conn.send_error(1040, "Too many connections", "08004")
        await conn.flush()
        return False
    state.user = user
    state.command = "Sleep"
    conn.send(ok_packet(status=Status.AUTOCOMMIT))
    await conn.flush()
    return True


def _parse_response(conn: Conn, state: SessionState, p: bytes) -> tuple[str | None, bytes, str]:
    caps, _max_packet, _charset = struct.unpack_from("<IIB", p, 0)
    if not caps & Cap.PROTOCOL_41:
        raise ProtocolError("pre-4.1 client")
    conn.client_caps = caps
    if len(p) == 32:
        if caps & Cap.SSL:
            return None, b"", ""
        raise ProtocolError("handshake response without a user name")
    user, pos = read_nul_str(p, 32)
    if caps & Cap.PLUGIN_AUTH_LENENC_CLIENT_DATA:
        response, pos = read_lenenc_str(p, pos)
    elif caps & Cap.SECURE_CONNECTION:
        n = p[pos]
        response, pos = p[pos + 1 : pos + 1 + n], pos + 1 + n
    else:
        response, pos = read_nul_str(p, pos)
    if caps & Cap.CONNECT_WITH_DB and pos < len(p):
        db, pos = read_nul_str(p + b"\0", pos)
        if db:
            state.db = db.decode()
    plugin = auth.NATIVE
    if caps & Cap.PLUGIN_AUTH and pos < len(p):
        raw, pos = read_nul_str(p + b"\0", pos)
        plugin = raw.decode() or auth.NATIVE
    return user.decode(), response or b"", plugin


async def _authenticate(
    conn: Conn, user: DumperUser, plugin: str, salt: bytes, response: bytes
) -> tuple[bool, bytes]:
    """Every failure takes the same path whatever the account (or its absence): a wrong
    caching_sha2 fast-auth answer, a user without sha2_digest and an unknown plugin all
    get the auth switch to mysql_native_password, then the native check."""
    if plugin == auth.CACHING_SHA2:
        if not user.password_hash and not user.sha2_digest and response == b"":
            return True, response
        if verify_caching_sha2(user, salt, response):
            conn.send(b"\x01\x03")  # fast auth success; the OK follows
            return True, response
    if plugin != auth.NATIVE:
        # Auth switch: every client we serve speaks mysql_native_password.
        conn.send(b"\xfe" + auth.NATIVE.encode() + b"\0" + salt + b"\0")
        await conn.flush()
        response = await conn.read_packet(MAX_HANDSHAKE_PACKET)
    return verify_native(user, salt, response), response


def _nobody(name: str) -> DumperUser:
    """A stand-in for an unknown user: a random password hash no answer matches, so the login
    costs the same work as a real one and fails the same way."""
    return DumperUser(name, "*" + os.urandom(20).hex().upper(), os.urandom(32).hex())


def handshake_version(config: DumperConfig) -> str:
    """The greeting's server version: MariaDB's prefix it with `5.5.5-` (so that old MySQL
    clients parse a 5.x version; MariaDB's clients and replicas strip it), as the mariadb
    flavour does; @@version and the files' FDE carry the plain version."""
    return ("5.5.5-" if config.flavor == "mariadb" else "") + config.version
