"""The harness of hosts proves itself (cdc_equipment/local_cluster/hosts.py): hosts reach each other; a cut,
both ways or one way, drops TCP silently (a connect times out, an open connection's read hangs,
no reset) and `heal` gives the same connection back; `drop` loses its share of pings; `slow`
limits the rate; a MariaDB server on a host answers from other hosts but not across a cut; and
`close` leaves no namespace, link or process behind."""

from __future__ import annotations

import os
import select
import socket
import struct
import subprocess
import sys
import time

import pytest

from cdc_equipment.local_cluster.hosts import Hosts, NotSupported, _alive, leftover_namespaces
from cdc_equipment.local_cluster.testing import throwaway_server
from tests.partition.conftest import needs_hosts

pytestmark = needs_hosts

PORT = 7000  # (each host's ports are its own)
# Echoes what it reads; with an argument N, reads N bytes, then answers b"k" (a sink); a thread
# per connection (one hangs across a cut while others go on).
SERVER = """
import socket, sys, threading

def handle(c):
    if len(sys.argv) > 1:
        n = int(sys.argv[1])
        while n > 0:
            n -= len(c.recv(1 << 16))
        c.sendall(b"k")
    else:
        while d := c.recv(1 << 16):
            c.sendall(d)
    c.close()

s = socket.create_server(("0.0.0.0", 7000))
while True:
    threading.Thread(target=handle, args=(s.accept()[0],), daemon=True).start()
"""
# From a host: connect to argv[1]:7000 within 1 s, echo a byte; exit 0 if it came back.
CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 7000), timeout=1)
c.sendall(b"x")
sys.exit(c.recv(1) != b"x")
"""


def serve(hosts, host, *args: str) -> None:
    hosts.popen(host, [sys.executable, "-c", SERVER, *args])
    deadline = time.monotonic() + 10
    while True:  # until it listens
        try:
            socket.create_connection((hosts[host].address, PORT), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"the server on {host} does not listen"
            time.sleep(0.05)


def reaches(hosts, a: str, b: str) -> bool:
    """Whether a TCP echo from host `a` to host `b`'s server works (1 s to connect)."""
    if a == "local":
        try:
            with socket.create_connection((hosts[b].address, PORT), timeout=1) as c:
                c.sendall(b"x")
                return c.recv(1) == b"x"
        except OSError:
            return False
    res = hosts.run_on(a, [sys.executable, "-c", CLIENT, hosts[b].address], capture_output=True)
    return res.returncode == 0


def test_hosts_reach_each_other(hosts):
    for name in ("a", "b"):
        hosts.add(name)
        serve(hosts, name)
    assert reaches(hosts, "local", "a") and reaches(hosts, "local", "b")
    assert reaches(hosts, "a", "b") and reaches(hosts, "b", "a")
    assert hosts["a"].netns != hosts["b"].netns and hosts.local.netns == ""
    assert len({h.address for h in hosts.hosts.values()}) == 3


def test_a_cut_both_ways_hangs_without_reset_and_heals(hosts):
    b = hosts.add("b")
    hosts.add("c")
    serve(hosts, "b")
    serve(hosts, "c")
    conn = socket.create_connection((b.address, PORT), timeout=2)
    conn.sendall(b"1")
    assert conn.recv(1) == b"1"

    hosts.cut("local", "b")
    started = time.monotonic()
    with pytest.raises(TimeoutError):  # (not ConnectionRefused: no RST comes back)
        socket.create_connection((b.address, PORT), timeout=1)
    assert time.monotonic() - started >= 0.9
    conn.settimeout(1)
    conn.sendall(b"2")
    with pytest.raises(TimeoutError):  # the open connection hangs, half-open
        conn.recv(1)
    assert reaches(hosts, "local", "c") and reaches(hosts, "c", "b")  # only that link is cut

    hosts.heal("local", "b")
    conn.settimeout(10)
    assert conn.recv(1) == b"2"  # the same connection: TCP's retransmission got through
    assert reaches(hosts, "local", "b")
    conn.close()


def test_a_cut_one_way(hosts):
    hosts.add("b")
    serve(hosts, "b")
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind((hosts.local.address, 0))
    listener.settimeout(1)
    send_to_local = (
        "import socket, sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
        f".sendto(b'u', ({hosts.local.address!r}, {listener.getsockname()[1]}))"
    )

    def b_to_local_arrives() -> bool:
        hosts.run_on("b", [sys.executable, "-c", send_to_local], check=True)
        try:
            return listener.recv(1) == b"u"
        except TimeoutError:
            return False

    try:
        hosts.cut("local", "b", both=False)  # local → b dropped, b → local passes
        assert not reaches(hosts, "local", "b")
        assert b_to_local_arrives()
        hosts.heal("b")
        hosts.cut("b", "local", both=False)  # the SYN gets there, its SYN-ACK does not
        assert not reaches(hosts, "local", "b")
        assert not b_to_local_arrives()
        hosts.heal("local")
        assert reaches(hosts, "local", "b") and b_to_local_arrives()
    finally:
        listener.close()


def pings(address: str, count: int, timeout: float = 1.0) -> int:
    """ICMP echo requests to `address` from here (a raw socket: we are root), one every 2 ms;
    how many were answered. Replies are read as they come: a raw socket gets a copy of every
    ICMP packet of the namespace (another test's pings too), and a full buffer would lose ours."""
    ident = os.getpid() & 0xFFFF
    answered: set[int] = set()
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        s.setblocking(False)

        def receive(until: float) -> None:
            while True:
                ready, _, _ = select.select([s], [], [], max(0.0, until - time.monotonic()))
                if not ready:
                    return
                packet, (src, _) = s.recvfrom(1500)
                kind, _, _, rid, seq = struct.unpack("!BBHHH", packet[20:28])
                if src == address and kind == 0 and rid == ident:
                    answered.add(seq)
                    if len(answered) == count:
                        return

        for seq in range(count):
            header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            s.sendto(header[:2] + struct.pack("!H", _checksum(header)) + header[4:], (address, 0))
            receive(time.monotonic() + 0.002)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(answered) < count:
            receive(deadline)
    return len(answered)


def _checksum(data: bytes) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def test_drop_loses_its_share(hosts):
    b = hosts.add("b")
    assert pings(b.address, 50) == 50
    hosts.drop("local", "b", 50, both=False)
    got = pings(b.address, 400)
    assert 140 <= got <= 260, f"{got} of 400 pings answered with 50% of requests dropped"
    hosts.heal("b")
    assert pings(b.address, 50) == 50


def test_slow_limits_the_rate(hosts):
    b = hosts.add("b")
    size = 400_000  # bytes: 1 s at 3200 kbit/s

    def send() -> float:
        for p in hosts.procs:  # (the sink of the previous send)
            p.kill()
            p.wait()
        serve(hosts, "b", str(size))
        started = time.monotonic()
        with socket.create_connection((b.address, PORT), timeout=10) as c:
            c.sendall(b"\0" * size)
            assert c.recv(1) == b"k"  # (the sink read it all: not just a full send buffer)
        return time.monotonic() - started

    fast = send()
    hosts.slow("local", "b", 3200)
    slow = send()
    assert 0.7 < slow < 3, f"400 kB at 3200 kbit/s took {slow:.2f} s"
    hosts.heal("local", "b")
    assert send() < max(0.4, fast * 5)


def test_delay_needs_netem(hosts):
    b = hosts.add("b")
    try:
        hosts.delay("local", "b", 100)
    except NotSupported as exc:
        assert "netem" in str(exc)
        return
    started = time.monotonic()
    assert pings(b.address, 1) == 1
    assert time.monotonic() - started >= 0.2  # (100 ms each way)


def test_a_mariadb_server_on_a_host(hosts, tmp_path):
    db, cli = hosts.add("db"), hosts.add("cli")
    server = throwaway_server(tmp_path, server_id=7, name="db", host=db)
    try:
        assert server.netns == db.netns and server.host == db.address
        with server.connect() as conn, conn.cursor() as cur:  # from local
            cur.execute("SELECT @@bind_address")
            assert cur.fetchone()[0] == db.address

        def query_from_cli() -> subprocess.CompletedProcess:
            return hosts.run_on(
                cli,
                ["mariadb", f"--host={db.address}", f"--port={server.port}", "--user=root"]
                + ["--connect-timeout=1", "--batch", "-e", "SELECT 1"],
                capture_output=True,
                text=True,
                timeout=30,
            )

        assert query_from_cli().stdout.split() == ["1", "1"]
        hosts.cut(cli, db)
        assert query_from_cli().returncode != 0
        assert server.status().up  # local still reaches it
        hosts.heal(cli)
        assert query_from_cli().returncode == 0
    finally:
        server.stop()


def test_close_leaves_nothing():
    hosts = Hosts()
    try:
        a = hosts.add("a")
        tracked = hosts.popen(a, ["sleep", "600"])
        # a process it did not start (a daemon's child): found in the namespace and killed
        hosts.run_on(a, ["sh", "-c", "sleep 600 >/dev/null 2>&1 &"], check=True)
        others = [
            int(p)
            for p in subprocess.run(
                ["ip", "netns", "pids", a.netns], capture_output=True, text=True
            ).stdout.split()
        ]
        hosts.cut("local", "a")
        names = [a.netns, hosts.hub]
    finally:
        hosts.close()
    assert tracked.poll() is not None
    assert others and not [p for p in others if _alive(p)], "a process survived its namespace"
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n in netns for n in names)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f"{hosts.run}:" not in links and f"{hosts.run}@" not in links
    assert not [n for n in leftover_namespaces() if n.startswith(hosts.run)]
    hosts.close()  # (again: nothing happens)


def test_hosts_of_a_dead_process_are_swept():
    """A test process SIGKILLed before its close left namespaces: the next Hosts removes them."""
    code = (
        "import os; from cdc_equipment.local_cluster.hosts import Hosts; h = Hosts(); h.add('x'); "
        "print(h.run, flush=True); os._exit(0)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
    )
    run = res.stdout.strip()
    assert [n for n in leftover_namespaces() if n.startswith(run)]
    with Hosts():
        pass
    assert not [n for n in leftover_namespaces() if n.startswith(run)]
