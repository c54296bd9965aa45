"""Connection-level abuse: idle logins (wait_timeout), floods of logged-in and of silent
unauthenticated connections (max_connections with an admin's spare slot, the unauthenticated
bound, connect_timeout), dump clients that stop reading, and the heartbeat flood. Each asserts
the clean answer AND that the writer kept writing."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

import pymysql
import pytest

from tests.dumper.hostile.conftest import (
    ADMIN,
    MAX_CONNECTIONS,
    MAX_UNAUTHENTICATED,
    READER,
    closed_by_server,
    err_code,
    login_raw,
    open_raw,
    packet,
    read_packet,
)


def set_vars(sock: socket.socket, sql: bytes) -> None:
    sock.sendall(packet(b"\x03" + sql, 0))
    _, payload = read_packet(sock)
    assert payload[:1] == b"\x00", payload


def start_dump(live, file: str = "binlog.000001", pos: int = 4, **sock_opts) -> socket.socket:
    sock = login_raw(live)
    for opt, value in sock_opts.items():
        sock.setsockopt(socket.SOL_SOCKET, getattr(socket, opt), value)
    set_vars(sock, b"SET @master_binlog_checksum = 'CRC32'")
    sock.sendall(packet(b"\x12" + struct.pack("<IHI", pos, 0, 7000) + file.encode(), 0))
    return sock


def test_idle_login_is_closed_after_wait_timeout(healthy):
    with login_raw(healthy) as sock:
        set_vars(sock, b"SET wait_timeout = 1")
        assert closed_by_server(sock, bound_s=30)
    # the default (28800 s) keeps an idle connection: it answers after the 1 s above
    conn = healthy.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@wait_timeout")
            assert cur.fetchone()[0] == 28800
    finally:
        conn.close()


def test_an_idle_snapshot_transaction_is_closed(healthy):
    """A pinned snapshot holds binlog files from purge: idle inside a transaction for
    idle_readonly_transaction_timeout, the connection is closed (outside one, wait_timeout)."""
    with login_raw(healthy) as sock:
        set_vars(sock, b"SET idle_readonly_transaction_timeout = 1")
        set_vars(sock, b"START TRANSACTION WITH CONSISTENT SNAPSHOT")
        assert closed_by_server(sock, bound_s=30)
    with login_raw(healthy) as sock:  # the same setting, no transaction: kept
        set_vars(sock, b"SET idle_readonly_transaction_timeout = 1")
        time.sleep(2)
        set_vars(sock, b"SET @still = 1")


def test_half_sent_command_is_cut_after_net_read_timeout(healthy):
    """Once a command has begun, the rest must come within net_read_timeout (MySQL: 1159)."""
    with login_raw(healthy) as sock:
        set_vars(sock, b"SET net_read_timeout = 1")
        sock.sendall(packet(b"\x03SELECT 'never finished'", 0)[:12])
        _, payload = read_packet(sock)
        assert err_code(payload) == 1159
        assert closed_by_server(sock)


def test_a_dump_is_not_idle(healthy):
    """A dump longer than wait_timeout goes on: only the command loop waits for commands."""
    with login_raw(healthy) as sock:
        set_vars(sock, b"SET wait_timeout = 1, @master_heartbeat_period = 200000000")
        set_vars(sock, b"SET @master_binlog_checksum = 'CRC32'")
        name, pos = healthy.query("SHOW MASTER STATUS")[0][:2]
        sock.sendall(packet(b"\x12" + struct.pack("<IHI", pos, 0, 7001) + name.encode(), 0))
        started = time.monotonic()
        received = 0
        sock.settimeout(30)
        while time.monotonic() - started < 3:  # three wait_timeouts of dump
            _, payload = read_packet(sock)  # EOFError if the server closed it
            assert payload[:1] == b"\x00", payload
            received += 1
        assert received >= 3  # fake rotate, FDE, then events or heartbeats


def wait_until_alone(live) -> None:
    """Until the server holds no connection but the asking one (earlier tests' closed sockets
    may take a moment to end their sessions); a bound, not a measurement."""
    deadline = time.monotonic() + 30
    while len(live.query("SHOW PROCESSLIST", ADMIN)) > 1:
        assert time.monotonic() < deadline, live.query("SHOW PROCESSLIST", ADMIN)
        time.sleep(0.1)


def test_login_flood_keeps_a_slot_for_an_admin(healthy):
    wait_until_alone(healthy)
    conns: list[pymysql.Connection] = []
    try:
        with pytest.raises(pymysql.err.OperationalError) as err:
            for _ in range(MAX_CONNECTIONS + 1):
                conns.append(healthy.connect(READER))
        assert err.value.args[0] == 1040
        assert len(conns) == MAX_CONNECTIONS
        admin = healthy.connect(ADMIN)  # the spare slot
        conns.append(admin)
        with pytest.raises(pymysql.err.OperationalError) as err:
            healthy.connect(ADMIN)  # only one spare
        assert err.value.args[0] == 1040
        with admin.cursor() as cur:  # the admin sees and ends the flood
            cur.execute("SHOW PROCESSLIST")
            flood = [row[0] for row in cur.fetchall() if row[1] == READER[0]]
            assert len(flood) == MAX_CONNECTIONS
            for cid in flood:
                cur.execute(f"KILL {cid}")
    finally:
        for c in conns:
            with contextlib.suppress(Exception):
                c.close()


def test_silent_unauthenticated_flood_is_bounded_and_timed_out(healthy):
    wait_until_alone(healthy)
    silent = [open_raw(healthy)[0] for _ in range(MAX_UNAUTHENTICATED)]
    try:
        extra = socket.create_connection(("127.0.0.1", healthy.port), timeout=30)
        with extra:
            _, payload = read_packet(extra)
            assert err_code(payload) == 1040
            assert closed_by_server(extra)
        # connect_timeout ends each silent one
        for sock in silent:
            assert closed_by_server(sock, bound_s=30)
    finally:
        for sock in silent:
            sock.close()
    assert healthy.query("SELECT 1") == [(1,)]


def test_dump_clients_that_stop_reading(healthy):
    """Issue 19's 64 dump clients, half of them not reading, scaled to the suite's 40 slots:
    16 dumps from the first byte into sockets nobody reads (their buffers fill up) and 16 from
    the end that read. The writer goes on, and every reading dump gets what it writes."""
    half = (MAX_CONNECTIONS - 8) // 2
    stalled = [start_dump(healthy, SO_RCVBUF=4096) for _ in range(half)]
    readers: list[socket.socket] = []
    try:
        name, pos = healthy.query("SHOW MASTER STATUS")[0][:2]
        readers = [start_dump(healthy, name, pos) for _ in range(half)]
        for reader in readers:
            reader.settimeout(60)
            types: list[int] = []
            while not any(t not in (4, 15, 27) for t in types):  # rotate, FDE, heartbeat
                _, payload = read_packet(reader)
                assert payload[:1] == b"\x00", payload
                types.append(payload[1 + 4])
        assert healthy.query("SHOW MASTER STATUS", ADMIN)[0][1] > 0
    finally:
        for sock in stalled + readers:
            sock.close()


def test_heartbeat_flood_does_not_starve_the_writer(live):
    """A 1 ns period is clamped to 1 ms and the sender yields after each heartbeat; the server
    runs apart from the writer anyway (docs/dumper.md, "Serving cannot stall writing")."""
    before = live.binlog_size()
    stop = threading.Event()
    with login_raw(live) as sock:
        set_vars(sock, b"SET @master_heartbeat_period = 1, @master_binlog_checksum = 'CRC32'")
        name, pos = live.query("SHOW MASTER STATUS", ADMIN)[0][:2]
        sock.sendall(packet(b"\x12" + struct.pack("<IHI", pos, 0, 7002) + name.encode(), 0))

        def drain() -> None:  # read as fast as we can: what makes the flood
            sock.settimeout(1)
            while not stop.is_set():
                try:
                    if not sock.recv(1 << 16):
                        return
                except TimeoutError:
                    continue
                except OSError:
                    return

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 20  # a bound, not a measurement
            while live.binlog_size() <= before:
                assert time.monotonic() < deadline, "no write during the heartbeat flood"
                time.sleep(0.1)
        finally:
            stop.set()
            reader.join(10)
    live.assert_healthy(before)
