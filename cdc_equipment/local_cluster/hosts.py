"""Hosts on one machine: network namespaces on one bridge, and faults on the links between them.

`Hosts()` makes a hub namespace holding a Linux bridge; `add(name)` makes a host: a namespace
of its own with a veth into the hub and an address in this run's /24 (10.210-229.y.0/24, chosen
from the pid and clear of every route of the machine, so that pytest-xdist workers each have
their own). The root namespace, where the test runs, is on the bridge too (the host "local",
address .1): the test reaches every host, every host reaches it. No address outside the /24 is
routed anywhere: no packet leaves the machine.

Faults are made in the hub, between the veths, where a real network fails: nftables rules in a
bridge table (`cut`: every packet dropped; `drop`: a random share dropped) and tc qdiscs on the
hub's port towards the receiver (`slow`: an htb class of the given rate; `delay`: netem, where
the kernel has it). Neither end sees anything locally: no reset, no ICMP, no EPERM from a send
(as a drop in the sender's own OUTPUT hook would give): a cut TCP connection is half-open,
connects time out, reads hang. Each fault is one way (a → b) or both ways (`both=True`, the
default); `heal` removes them.

`close()` (or leaving `with Hosts() as hosts:`) kills every process in the namespaces, whoever
started it (a process left in a namespace keeps it, and its veths, alive), and deletes the
namespaces and the root namespace's veth, also after a failure; a `Hosts` of a process that died
without closing is swept by the next one (its names carry its pid), and `leftover_namespaces()`
lists any (`python -m cdc_equipment.local_cluster.leftovers`).

Needs root, iproute2's `ip` and (for faults) `nft`: `missing()` says what is missing.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PREFIX = "cdch"  # every namespace and root-namespace link of a Hosts: cdch<pid>n<run>[-<host>]
_NAME = re.compile(rf"^{PREFIX}(\d+)n(\d+)(?:-.*)?$")
LOCAL = "local"  # the root namespace's host
BRIDGE = "br0"  # (in the hub namespace: names there are the hub's own)
TABLE = "cdc_faults"
UNLIMITED = ["rate", "4gbit", "burst", "256k"]  # traffic no `slow` limits (tc computes no
# burst for a faster rate: it shows 0 bytes)
_runs = itertools.count()


class HostsError(RuntimeError):
    """A namespace, link, rule or qdisc could not be made; the message holds `ip`'s words."""


class NotSupported(HostsError):
    """This kernel cannot make the fault (e.g. `delay`: it has no netem qdisc)."""


def missing() -> str | None:
    """Why `Hosts` cannot run here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables"), ("tc", "iproute2")):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (Debian's {package}; `make setup` installs it)"
    return None


@dataclass(frozen=True, slots=True)
class Host:
    """One host: `netns` is its namespace ("" for the local host: the root namespace),
    `address` its IPv4 address, `hub_link` its veth's end in the hub (a port of the bridge)."""

    name: str
    netns: str
    address: str
    hub_link: str

    def argv(self, argv: Iterable[str]) -> list[str]:
        """`argv` run on this host: `ip netns exec` execs it, so the pid is the program's."""
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else list(argv)


@dataclass(slots=True)
class Fault:
    """What a link a → b does to a packet now (one way; `both` makes two)."""

    cut: bool = False
    drop: int = 0  # percent of packets dropped at random
    kbit: int = 0  # rate limit; 0: none
    delay_ms: int = 0  # netem delay; 0: none

    def __bool__(self) -> bool:
        return self.cut or bool(self.drop or self.kbit or self.delay_ms)


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise HostsError(f"{' '.join(argv)}: {res.stderr.strip() or res.stdout.strip()}")
    return res


class Hosts:
    """The hosts of one test run (see the module's docstring)."""

    _netem: bool | None = None  # the kernel's answer, probed once per process

    def __init__(self) -> None:
        sweep_stale()
        self.run = f"{PREFIX}{os.getpid()}n{next(_runs)}"  # ≤ 14 chars: a kernel link name
        self.hub = f"{self.run}-hub"
        self.net = _free_subnet(os.getpid() * 8 + int(self.run.rsplit("n", 1)[1]))
        self.hosts: dict[str, Host] = {}
        self.faults: dict[tuple[str, str], Fault] = {}
        self.procs: list[subprocess.Popen] = []
        self._namespaces: list[str] = []
        self._table = False
        self._shaped: set[str] = set()  # hub ports with a qdisc of ours
        try:
            self._add_namespace(self.hub)
            _run(["ip", "-n", self.hub, "link", "add", BRIDGE, "type", "bridge"])
            _run(["ip", "-n", self.hub, "link", "set", BRIDGE, "up"])
            # the root namespace's veth: its end here is named after the run (unique there)
            _run(
                ["ip", "link", "add", self.run, "type", "veth"]
                + ["peer", "name", "p0", "netns", self.hub]
            )
            self._plug("p0")
            _run(["ip", "addr", "add", f"{self._address(1)}/24", "dev", self.run])
            _run(["ip", "link", "set", self.run, "up"])
            self.hosts[LOCAL] = Host(LOCAL, "", self._address(1), "p0")
        except BaseException:
            self.close()
            raise

    # -- hosts -------------------------------------------------------------------------------
    def add(self, name: str) -> Host:
        """A new host `name`: its namespace, its veth into the hub, its address, lo up."""
        if name in self.hosts:
            raise HostsError(f"host {name!r} exists already")
        i = len(self.hosts)  # (the local host is 0, at .1)
        if i > 250:
            raise HostsError("at most 250 hosts on one /24")
        ns, port = f"{self.run}-{name}", f"p{i}"
        self._add_namespace(ns)
        _run(
            ["ip", "link", "add", "eth0", "netns", ns, "type", "veth"]
            + ["peer", "name", port, "netns", self.hub]
        )
        self._plug(port)
        address = self._address(i + 1)
        _run(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        host = self.hosts[name] = Host(name, ns, address, port)
        return host

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    @property
    def local(self) -> Host:
        return self.hosts[LOCAL]

    def popen(self, host: Host | str, argv: Iterable[str], **kw) -> subprocess.Popen:
        """`argv` started on `host` (a session of its own unless told otherwise); `close()`
        kills it if it still runs."""
        kw.setdefault("start_new_session", True)
        proc = subprocess.Popen(self._host(host).argv(argv), **kw)
        self.procs.append(proc)
        return proc

    def run_on(self, host: Host | str, argv: Iterable[str], **kw) -> subprocess.CompletedProcess:
        """`argv` run to its end on `host` (subprocess.run's keywords)."""
        return subprocess.run(self._host(host).argv(argv), **kw)

    # -- faults ------------------------------------------------------------------------------
    def cut(self, a: Host | str, b: Host | str, both: bool = True) -> None:
        """Every packet a → b (and b → a) dropped, silently: connections hang, half-open."""
        self._set(a, b, both, cut=True)

    def drop(self, a: Host | str, b: Host | str, share: int, both: bool = True) -> None:
        """`share` percent of the packets a → b (and b → a) dropped at random."""
        if not 0 <= share <= 100:
            raise ValueError(f"share is a percentage, got {share}")
        self._set(a, b, both, drop=share)

    def slow(self, a: Host | str, b: Host | str, kbit: int, both: bool = True) -> None:
        """Traffic a → b (and b → a) limited to `kbit` kbit/s (an htb class on the hub's port
        towards b, a u32 filter on a's address). This kernel has no netem: a delay comes from
        the queue a limited rate builds (a full queue drops, as a router's does)."""
        if kbit <= 0:
            raise ValueError(f"kbit must be positive, got {kbit}")
        self._set(a, b, both, kbit=kbit)

    def delay(self, a: Host | str, b: Host | str, ms: int, both: bool = True) -> None:
        """Every packet a → b (and b → a) held `ms` milliseconds (netem). Raises NotSupported
        where the kernel has no netem (this project's CI kernel): callers may skip on it."""
        if not self.netem():
            raise NotSupported(
                "this kernel has no netem qdisc (sch_netem): no delay; `slow` limits the rate"
            )
        self._set(a, b, both, delay_ms=ms)

    def heal(self, a: Host | str, b: Host | str | None = None) -> None:
        """Faults removed: between a and b (both ways), or every fault of a."""
        na = self._host(a).name
        nb = self._host(b).name if b is not None else None
        gone = [k for k in self.faults if na in k and (nb is None or nb in k)]
        for key in gone:
            del self.faults[key]
        self._apply({dst for _, dst in gone})

    def netem(self) -> bool:
        """Whether the kernel has netem (probed once: a netem qdisc on the hub's lo)."""
        if Hosts._netem is None:
            made = _run(
                ["ip", "netns", "exec", self.hub, "tc", "qdisc", "add", "dev", "lo"]
                + ["root", "netem", "delay", "1ms"],
                check=False,
            )
            Hosts._netem = made.returncode == 0
            if Hosts._netem:
                _run(["ip", "netns", "exec", self.hub, "tc", "qdisc", "del", "dev", "lo", "root"])
        return Hosts._netem

    def _set(self, a: Host | str, b: Host | str, both: bool, **what) -> None:
        ha, hb = self._host(a), self._host(b)
        if ha.name == hb.name:
            raise ValueError(f"a link joins two hosts, not {ha.name} with itself")
        pairs = [(ha.name, hb.name)] + ([(hb.name, ha.name)] if both else [])
        for key in pairs:
            fault = self.faults.setdefault(key, Fault())
            for k, v in what.items():
                setattr(fault, k, v)
        self._apply({dst for _, dst in pairs})

    def _apply(self, receivers: set[str]) -> None:
        """The hub's rules and qdiscs made to say what `faults` says (the nft chain whole, in
        one transaction; the qdiscs of the ports towards `receivers`)."""
        self._apply_rules()
        for name in receivers:
            self._apply_shaping(self.hosts[name])

    def _apply_rules(self) -> None:
        rules = []
        for (a, b), f in sorted(self.faults.items()):
            match = f"ip saddr {self.hosts[a].address} ip daddr {self.hosts[b].address}"
            if f.cut:
                rules.append(f"add rule bridge {TABLE} links {match} drop")
            elif f.drop:
                rules.append(
                    f"add rule bridge {TABLE} links {match} numgen random mod 100 < {f.drop} drop"
                )
        if not rules and not self._table:
            return
        script = []
        if not self._table:
            script += [
                f"add table bridge {TABLE}",
                f"add chain bridge {TABLE} links "
                "{ type filter hook forward priority 0 ; policy accept ; }",
            ]
        script += [f"flush chain bridge {TABLE} links", *rules]
        res = subprocess.run(
            ["ip", "netns", "exec", self.hub, "nft", "-f", "-"],
            input="\n".join(script) + "\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        if res.returncode != 0:
            raise HostsError(f"nft in {self.hub}: {res.stderr.strip()}\n" + "\n".join(script))
        self._table = True

    def _apply_shaping(self, receiver: Host) -> None:
        """The qdisc of the hub's port towards `receiver`: an htb with an unlimited default
        class and one class per sender it limits or delays, chosen by a u32 filter on the
        sender's address (netem under that class for a delay)."""
        dev = receiver.hub_link
        tc = ["ip", "netns", "exec", self.hub, "tc"]
        if dev in self._shaped:
            _run([*tc, "qdisc", "del", "dev", dev, "root"], check=False)
            self._shaped.discard(dev)
        senders = [
            (a, f)
            for (a, b), f in sorted(self.faults.items())
            if b == receiver.name and (f.kbit or f.delay_ms)
        ]
        if not senders:
            return
        self._shaped.add(dev)
        _run([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
        _run(
            [*tc, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1"]
            + ["htb", *UNLIMITED]
        )
        for n, (a, f) in enumerate(senders, start=10):
            rate = ["rate", f"{f.kbit}kbit", "ceil", f"{f.kbit}kbit"] if f.kbit else UNLIMITED
            _run(
                [*tc, "class", "add", "dev", dev, "parent", "1:", "classid", f"1:{n}"]
                + ["htb", *rate]
            )
            if f.delay_ms:
                _run(
                    [*tc, "qdisc", "add", "dev", dev, "parent", f"1:{n}", "handle", f"{n}:"]
                    + ["netem", "delay", f"{f.delay_ms}ms", "limit", "10000"]
                )
            _run(
                [*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1"]
                + ["u32", "match", "ip", "src", f"{self.hosts[a].address}/32"]
                + ["flowid", f"1:{n}"]
            )

    # -- the end -----------------------------------------------------------------------------
    def close(self) -> None:
        """Kill every process on the hosts, delete the namespaces and links; idempotent."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        _remove(self._namespaces, self.run)
        self._namespaces = []
        self.hosts, self.faults, self._table, self._shaped = {}, {}, False, set()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers -----------------------------------------------------------------------------
    def _host(self, host: Host | str) -> Host:
        name = host.name if isinstance(host, Host) else host
        try:
            return self.hosts[name]
        except KeyError:
            raise HostsError(f"no host {name!r} (have {sorted(self.hosts)})") from None

    def _address(self, n: int) -> str:
        return str(self.net.network_address + n)

    def _add_namespace(self, ns: str) -> None:
        _run(["ip", "netns", "add", ns])
        self._namespaces.append(ns)
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _plug(self, port: str) -> None:
        _run(["ip", "-n", self.hub, "link", "set", port, "master", BRIDGE])
        _run(["ip", "-n", self.hub, "link", "set", port, "up"])


def _remove(namespaces: list[str], root_link: str | None) -> None:
    """Kill what runs in `namespaces` (SIGKILL, waited for), delete them and `root_link`."""
    pids = []
    for ns in namespaces:
        res = _run(["ip", "netns", "pids", ns], check=False)
        pids += [int(p) for p in res.stdout.split()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        time.sleep(0.05)
    for ns in namespaces:
        _run(["ip", "netns", "del", ns], check=False)
    if root_link:
        _run(["ip", "link", "del", root_link], check=False)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _ours() -> tuple[list[str], list[str]]:
    """(namespaces, root-namespace links) named like a Hosts' on this machine."""
    namespaces = [n for n in (p.name for p in _netns_dir()) if _NAME.match(n)]
    res = _run(["ip", "-o", "link", "show"], check=False)
    links = []
    for line in res.stdout.splitlines():
        name = line.split(":", 2)[1].strip().split("@", 1)[0] if ":" in line else ""
        if _NAME.match(name):
            links.append(name)
    return namespaces, links


def _netns_dir() -> list[Path]:
    try:
        return list(Path("/run/netns").iterdir())
    except OSError:
        return []


def leftover_namespaces() -> list[str]:
    """Namespaces and root links a Hosts left behind: its process is gone, they are not."""
    if shutil.which("ip") is None:
        return []
    namespaces, links = _ours()
    return [n for n in namespaces + links if not _alive(int(_NAME.match(n)[1]))]


def sweep_stale() -> list[str]:
    """Remove what `leftover_namespaces` finds (a test process SIGKILLed before its close)."""
    stale = leftover_namespaces()
    if stale:
        namespaces = [n for n in stale if (Path("/run/netns") / n).exists()]
        _remove(namespaces, None)
        for link in set(stale) - set(namespaces):
            _run(["ip", "link", "del", link], check=False)
    return stale


def _free_subnet(seed: int) -> ipaddress.IPv4Network:
    """A /24 in 10.210.0.0-10.229.255.0 that overlaps no route or address of the machine,
    the first from `seed` on (a pid: xdist workers start apart)."""
    taken = []
    for argv in (["ip", "-4", "-o", "route", "show", "table", "all"], ["ip", "-4", "-o", "addr"]):
        for line in _run(argv, check=False).stdout.splitlines():
            for word in line.split():
                if "/" in word or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", word):
                    try:
                        taken.append(ipaddress.ip_network(word, strict=False))
                    except ValueError:
                        pass
    span = 20 * 256
    for k in range(seed, seed + span):
        k %= span
        net = ipaddress.ip_network(f"10.{210 + k // 256}.{k % 256}.0/24")
        if not any(net.overlaps(t) for t in taken if t.prefixlen > 0):
            return net
    raise HostsError("no free /24 in 10.210.0.0/16-10.229.0.0/16")
