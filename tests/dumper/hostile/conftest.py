"""The hostile-client suite (issue 19) runs against ONE real pipeline shared by its files: a
2-DN cluster, `cdc start` as a child process (the writer and the protocol server as in
production), and a slow transfer workload through the reference CN all along, so that every
test can show the writer kept writing while it was attacked: the global binlog must grow again
after each attack, the pipeline must still run, and its log must hold no traceback.

Small limits make the attacks small: max_allowed_packet 1 MiB, 40 connections (+1 for an
admin), 4 unauthenticated ones, connect_timeout 2 s.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql
import pytest

from cdc.config import Config, DumperUser
from cdc.protocol import auth
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from tests.compat.conftest import cdc_start, tail, transfers_until

ADMIN = ("repl", "repl")  # replication + admin + rows (the cluster's default account)
SLAVE = ("slave", "s1")  # replication only
READER = ("reader", "r1")  # neither
MAX_PACKET = 1 << 20
MAX_CONNECTIONS = 40
MAX_UNAUTHENTICATED = 4
CONNECT_TIMEOUT = 2
GROWTH_BOUND_S = 60  # a bound for "the binlog grew", not a measurement


@dataclass
class Live:
    config: Config
    binlog_dir: Path
    log: Path
    proc: subprocess.Popen
    stop_traffic: threading.Event = field(default_factory=threading.Event)
    traffic_errors: list[BaseException] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.config.dumper.port

    def binlog_size(self) -> int:
        return sum(p.stat().st_size for p in self.binlog_dir.glob("binlog.[0-9]*"))

    def connect(self, who: tuple[str, str] = SLAVE, **kw) -> pymysql.Connection:
        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user=who[0],
            password=who[1],
            connect_timeout=10,
            read_timeout=30,
            **kw,
        )

    def query(self, sql: str, who: tuple[str, str] = SLAVE) -> list[tuple]:
        conn = self.connect(who)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()

    def assert_healthy(self, size_before: int) -> None:
        """The writer kept writing: the global binlog grew past `size_before` (taken before the
        attack), the pipeline still runs, the server still answers, nothing was logged as a
        crash."""
        deadline = time.monotonic() + GROWTH_BOUND_S
        while self.binlog_size() <= size_before:
            assert self.proc.poll() is None, f"the pipeline exited:\n{tail(self.log)}"
            assert time.monotonic() < deadline, (
                f"the global binlog did not grow past {size_before} bytes within "
                f"{GROWTH_BOUND_S}s of the attack:\n{tail(self.log)}"
            )
            time.sleep(0.1)
        assert self.proc.poll() is None
        assert self.query("SELECT 1") == [(1,)]
        text = self.log.read_text(errors="replace")
        assert "Traceback" not in text and "internal error" not in text, tail(self.log, 60)
        assert not self.traffic_errors, self.traffic_errors


async def _traffic(cfg: Config, stop: threading.Event) -> None:
    await transfers_until(cfg, stop, accounts=20, partitions=2)


@pytest.fixture(scope="package")
def live(tmp_path_factory) -> Live:
    directory = tmp_path_factory.mktemp("hostile")
    cluster = throwaway_cluster(directory / "cluster", dns=2, spare_dns=0)
    try:
        cfg = cluster.config()
        d = cfg.dumper
        d.binlog_dir = str(directory / "binlog")
        d.port = free_base_port(0)
        d.users = [
            DumperUser(
                ADMIN[0], auth.native_hash(ADMIN[1]), replication=True, admin=True, select=True
            ),
            DumperUser(SLAVE[0], auth.native_hash(SLAVE[1]), auth.caching_sha2_digest(SLAVE[1])),
            DumperUser(READER[0], auth.native_hash(READER[1]), replication=False),
        ]
        d.max_allowed_packet = MAX_PACKET
        d.max_connections = MAX_CONNECTIONS
        d.max_unauthenticated_connections = MAX_UNAUTHENTICATED
        d.connect_timeout = CONNECT_TIMEOUT
        cfg.cn.ground_truth_log = str(directory / "truth.jsonl")
        with cdc_start(cfg, directory) as proc:
            live = Live(cfg, Path(d.binlog_dir), directory / "pipeline.log", proc)

            def run_traffic() -> None:
                try:
                    asyncio.run(_traffic(cfg, live.stop_traffic))
                except BaseException as exc:  # reported by the next assert_healthy
                    live.traffic_errors.append(exc)

            traffic = threading.Thread(target=run_traffic, name="hostile-traffic", daemon=True)
            traffic.start()
            try:
                yield live
            finally:
                live.stop_traffic.set()
                traffic.join(60)
    finally:
        cluster.down()


@pytest.fixture
def healthy(live):
    """Each test: the binlog size before, and the health check after (skipped if the test
    failed already, so the first failure is the one reported)."""
    before = live.binlog_size()
    yield live
    live.assert_healthy(before)


# -- raw protocol helpers -------------------------------------------------------------------------
def packet(payload: bytes, seq: int) -> bytes:
    return struct.pack("<I", len(payload) | seq << 24) + payload


def read_packet(sock: socket.socket) -> tuple[int, bytes]:
    """(seq, payload) of one packet; raises EOFError if the server closed."""
    header = _recv_exact(sock, 4)
    length = header[0] | header[1] << 8 | header[2] << 16
    return header[3], _recv_exact(sock, length)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        data = sock.recv(n - len(out))
        if not data:
            raise EOFError("closed by the server")
        out += data
    return bytes(out)


def err_code(payload: bytes) -> int | None:
    return struct.unpack_from("<H", payload, 1)[0] if payload[:1] == b"\xff" else None


def closed_by_server(sock: socket.socket, bound_s: float = 30) -> bool:
    """Whether the server closes the connection (reads and drops anything before the close)."""
    sock.settimeout(bound_s)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def greeting_salt(payload: bytes) -> bytes:
    end = payload.index(b"\0", 1)
    part1 = payload[end + 5 : end + 13]
    rest = payload[end + 32 :]
    return part1 + rest[: rest.index(b"\0")]


CAPS = 0x0200 | 0x8000 | 0x00080000 | 0x00010000  # PROTOCOL_41, SECURE_CONN, PLUGIN_AUTH, MULTI


def handshake_response(user: str, response: bytes, plugin: str, caps: int = CAPS) -> bytes:
    body = struct.pack("<IIB23x", caps, 1 << 24, 45) + user.encode() + b"\0"
    body += bytes((len(response),)) + response + plugin.encode() + b"\0"
    return body


def open_raw(live: Live) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", live.port), timeout=30)
    _, greeting = read_packet(sock)
    return sock, greeting_salt(greeting)


def login_raw(live: Live, who: tuple[str, str] = SLAVE) -> socket.socket:
    sock, salt = open_raw(live)
    scramble = auth.native_scramble(who[1], salt)
    sock.sendall(packet(handshake_response(who[0], scramble, auth.NATIVE), 1))
    _, answer = read_packet(sock)
    assert answer[:1] == b"\x00", answer
    return sock
