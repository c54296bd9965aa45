"""The nemesis of tests/partition/test_nemesis.py (issue 39, part 4): a seeded schedule of
faults, each step one or two faults held a few seconds and then healed, and the faults' making
and undoing on a `PartitionCluster`.

The schedule is a pure function of the seed (`schedule(seed, seconds)`): the same seed gives
the same steps, kinds, links, directions, shares, rates and durations. Which dumper a step
names by role ("leader", "follower") is resolved when the step runs (a takeover may have
moved the lead), and the run's log (`Nemesis.ran`) says which host each fault hit."""

from __future__ import annotations

import asyncio
import random
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# Relative weights of the fault kinds in a step.
WEIGHTS = {
    "cut": 5,  # every packet dropped, both ways or one way
    "drop": 2,  # a share of the packets dropped at random, both ways
    "slow": 2,  # a rate limit, both ways
    "kill-dumper": 3,  # SIGKILL, restarted at the heal
    "gms-restart": 1,  # SIGKILL of the GMS's mariadbd, started at the heal
    "dn-restart": 1,  # SIGKILL of a DN's mariadbd, started at the heal
    "disk-fill": 1,  # a dumper's binlog tmpfs shrunk to full, grown at the heal
    "ddl": 1,  # a logical DDL (`cdc cn ddl`), alone, between faults
}
LINK_KINDS = ("cut", "drop", "slow")
# The links that matter, by role: (a, b) of `Nemesis.hosts_of`.
LINKS = ("leader-gms", "leader-follower", "dumper-dn", "cn-dn", "consumer-leader")
TMPFS_KB = 256 * 1024  # a dumper's binlog file system when not full


@dataclass
class Fault:
    kind: str
    link: str = ""  # a LINKS entry (link kinds)
    one_way: int = 0  # 0: both ways; 1: a → b only; 2: b → a only (cut)
    share: int = 0  # drop: percent
    kbit: int = 0  # slow: rate
    role: str = ""  # "leader" | "follower" (kill-dumper, disk-fill, dumper-dn)
    dn: int = 0  # 1 | 2 (dn-restart, dumper-dn, cn-dn)
    consumer: str = ""  # "c1" | "c2" (consumer-leader)

    def describe(self) -> str:
        if self.kind in LINK_KINDS:
            how = {"cut": "cut", "drop": f"drop {self.share}%", "slow": f"slow {self.kbit} kbit"}
            way = ("both ways", "one way a→b", "one way b→a")[self.one_way]
            what = self.link
            if self.link == "dumper-dn":
                what = f"{self.role}-dn{self.dn}"
            elif self.link == "cn-dn":
                what = f"cn-dn{self.dn}"
            elif self.link == "consumer-leader":
                what = f"{self.consumer}-leader"
            return f"{how[self.kind]} {what} {way}"
        if self.kind in ("kill-dumper", "disk-fill"):
            return f"{self.kind} {self.role}"
        if self.kind == "dn-restart":
            return f"dn-restart dn{self.dn}"
        return self.kind


@dataclass
class Step:
    faults: list[Fault]
    hold_s: float  # how long the faults last
    calm_s: float  # after the heal, before the next step


def schedule(seed: int, seconds: float, *, disk: bool = True, ddl: bool = True) -> list[Step]:
    """Steps whose holds and calms add up to about `seconds`."""
    rng = random.Random(seed)
    weights = {
        k: w for k, w in WEIGHTS.items() if (disk or k != "disk-fill") and (ddl or k != "ddl")
    }
    kinds, w = list(weights), list(weights.values())
    steps, total = [], 0.0
    while total < seconds:
        first = _fault(rng, rng.choices(kinds, w)[0])
        faults = [first]
        # a second fault at the same time, now and then: of another kind, never beside a DDL
        if first.kind != "ddl" and rng.random() < 0.35:
            other = [k for k in kinds if k not in (first.kind, "ddl")]
            faults.append(_fault(rng, rng.choice(other)))
        hold = 0.0 if first.kind == "ddl" else round(rng.uniform(3, 9), 1)
        calm = round(rng.uniform(2, 5), 1)
        steps.append(Step(faults, hold, calm))
        total += hold + calm
    if ddl and not any(s.faults[0].kind == "ddl" for s in steps):
        # a DDL in every run, halfway (the schedule is a few minutes: it may draw none)
        steps.insert(len(steps) // 2, Step([Fault("ddl")], 0.0, round(rng.uniform(2, 5), 1)))
    return steps


def _fault(rng: random.Random, kind: str) -> Fault:
    f = Fault(kind)
    if kind in LINK_KINDS:
        f.link = rng.choice(LINKS)
        f.one_way = rng.choice((0, 0, 1, 2)) if kind == "cut" else 0
        f.share = rng.choice((20, 40, 70)) if kind == "drop" else 0
        f.kbit = rng.choice((100, 400, 2000)) if kind == "slow" else 0
        f.role = rng.choice(("leader", "follower"))
        f.dn = rng.choice((1, 2))
        f.consumer = rng.choice(("c1", "c2"))
    elif kind in ("kill-dumper", "disk-fill"):
        f.role = rng.choice(("leader", "follower"))
    elif kind == "dn-restart":
        f.dn = rng.choice((1, 2))
    return f


def render(steps: list[Step]) -> str:
    lines, t = [], 0.0
    for n, s in enumerate(steps):
        what = " + ".join(f.describe() for f in s.faults)
        lines.append(
            f"  step {n:2d} ~{t:5.0f}s: {what}, held {s.hold_s:.1f}s, calm {s.calm_s:.1f}s"
        )
        t += s.hold_s + s.calm_s
    return "\n".join(lines)


# -- the binlog tmpfs of a dumper ----------------------------------------------------------------
def mount_tmpfs(path: Path, size_kb: int = TMPFS_KB) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)], check=True
    )


def resize_tmpfs(path: Path, size_kb: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_kb}k", str(path)], check=True)


def used_kb(path: Path) -> int:
    usage = shutil.disk_usage(path)
    return (usage.total - usage.free) // 1024


@dataclass
class Nemesis:
    """Makes and undoes the faults of a schedule on cluster `c` (a PartitionCluster);
    `ran` is the log of what it did, seconds from `t0`."""

    c: object
    disk: bool
    t0: float = field(default_factory=time.monotonic)
    ran: list[str] = field(default_factory=list)
    ddl_n: int = 0

    def note(self, what: str) -> None:
        self.ran.append(f"{time.monotonic() - self.t0:+7.1f}s {what}")

    def roles(self) -> tuple[int, int]:
        """(leader, follower) dumper ids now (dumper 1 leads if none says it does)."""
        leader = self.c.leader() or 1
        return leader, 3 - leader

    def dumper(self, role: str) -> int:
        leader, follower = self.roles()
        return leader if role == "leader" else follower

    def hosts_of(self, f: Fault) -> tuple[str, str]:
        leader, follower = self.roles()
        return {
            "leader-gms": (f"d{leader}", "gms"),
            "leader-follower": (f"d{leader}", f"d{follower}"),
            "dumper-dn": (f"d{self.dumper(f.role)}", f"dn{f.dn}"),
            "cn-dn": ("cn", f"dn{f.dn}"),
            "consumer-leader": (f.consumer, f"d{leader}"),
        }[f.link]

    async def make(self, f: Fault) -> tuple:
        """Makes fault `f`; returns what `undo` needs."""
        c, hosts = self.c, self.c.hosts
        if f.kind in LINK_KINDS:
            a, b = self.hosts_of(f)
            if f.one_way == 2:
                a, b = b, a
            both = f.one_way == 0
            if f.kind == "cut":
                hosts.cut(a, b, both=both)
            elif f.kind == "drop":
                hosts.drop(a, b, f.share, both=both)
            else:
                hosts.slow(a, b, f.kbit, both=both)
            self.note(f"{f.describe()}: {a} {'↔' if both else '→'} {b}")
            return ("link", a, b)
        if f.kind == "kill-dumper":
            i = self.dumper(f.role)
            if i in c.dumpers.procs:
                await asyncio.to_thread(c.dumpers.kill, i)
            self.note(f"{f.describe()}: dumper {i} SIGKILLed")
            return ("dumper", i)
        if f.kind == "gms-restart":
            await asyncio.to_thread(c.cluster.gms.kill)
            self.note("gms SIGKILLed")
            return ("server", c.cluster.gms)
        if f.kind == "dn-restart":
            dn = c.cluster.dns[f.dn - 1]
            await asyncio.to_thread(dn.kill)
            self.note(f"{dn.name} SIGKILLed")
            return ("server", dn)
        if f.kind == "disk-fill":
            i = self.dumper(f.role)
            path = c.dumpers.binlog(i)
            size = used_kb(path) + 512  # the load fills that in a second or two
            resize_tmpfs(path, size)
            self.note(f"{f.describe()}: dumper {i}'s binlog tmpfs shrunk to {size} KB")
            return ("disk", path)
        if f.kind == "ddl":
            await self.ddl()
            return ("nothing",)
        raise ValueError(f.kind)

    async def undo(self, made: tuple) -> None:
        c = self.c
        what = made[0]
        if what == "link":
            c.hosts.heal(made[1], made[2])
            self.note(f"healed {made[1]} ↔ {made[2]}")
        elif what == "dumper":
            if made[1] not in c.dumpers.procs:
                c.dumpers.start(made[1])
                self.note(f"dumper {made[1]} started")
        elif what == "server":
            await asyncio.to_thread(made[1].start)
            self.note(f"{made[1].name} started")
        elif what == "disk":
            resize_tmpfs(made[1], TMPFS_KB)
            self.note(f"{made[1].parent.name}'s binlog tmpfs grown")

    async def ddl(self) -> None:
        """ADD COLUMN and DROP COLUMN in turn on the transfer table (run again until done:
        a DDL interrupted by a fault is resumed by running it again)."""
        n, self.ddl_n = self.ddl_n, self.ddl_n + 1
        if n % 2 == 0:
            sql = f"ALTER TABLE bank.accounts ADD COLUMN nem{n} INT NULL"
        else:
            sql = f"ALTER TABLE bank.accounts DROP COLUMN nem{n - 1}"
        for attempt in range(3):
            try:
                res = await asyncio.to_thread(self.c.cdc_result, "cn", "ddl", sql, timeout=60)
            except subprocess.TimeoutExpired:
                self.note(f"ddl {sql!r}: no answer in 60 s (attempt {attempt + 1})")
                continue
            if res.returncode == 0:
                self.note(f"ddl {sql!r}: done")
                return
            self.note(f"ddl {sql!r}: failed ({(res.stdout + res.stderr).strip()[-200:]})")
            await asyncio.sleep(2)
        raise AssertionError(f"the DDL {sql!r} did not finish in 3 attempts, no fault held")
