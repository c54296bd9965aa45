"""What the leader-follower partition tests watch while a fault lasts: every 0.1 s, each
dumper's status (role, term, transactions written, the ack gate, the follower's copy) and each
consumer's bytes, with times counted from the fault; then the spans and rates they judge, and a
timeline of the changes to print.

(test_leader_gms_cut.py has its own, older `Timeline` of the dumpers alone.)"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from binlog_writer.recovery import scan
from tests.partition.cluster import IDS, PartitionCluster


@dataclass
class Seen:
    at: float  # seconds after the fault (negative: before it)
    role: str  # "" when the status is stale (> 3 s old) or the process is gone
    term: int
    transactions: int  # the leader's (0 on a follower)
    degraded: bool  # the leader's ack gate serves what no follower acknowledged
    gave_up: int  # how often the leader's gate gave up waiting
    ack_age: float | None  # seconds since the leader last heard a follower's acknowledgement
    copy: tuple[str, int] | None  # a follower's copy: file, position
    on_disk: int  # the bytes of its binlog files (the leader's binlog, a follower's copy)


@dataclass
class Watch:
    c: PartitionCluster
    start: float = field(default_factory=time.monotonic)  # time 0: the fault (`zero`)
    dumpers: dict[int, list[Seen]] = field(default_factory=lambda: {i: [] for i in IDS})
    consumers: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    marks: list[tuple[float, str]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.start

    def zero(self) -> None:
        """Times from now on (and those already taken, shifted) count from the fault."""
        shift = time.monotonic() - self.start
        self.start += shift
        for seen in self.dumpers.values():
            for s in seen:
                s.at -= shift
        for sizes in self.consumers.values():
            sizes[:] = [(t - shift, n) for t, n in sizes]
        self.marks = [(t - shift, w) for t, w in self.marks]

    def mark(self, what: str) -> None:
        self.marks.append((self.now(), what))

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(0.1)

    def sample(self) -> None:
        at = self.now()
        # The consumers first: what a consumer holds was acknowledged (if the gate did not
        # give up) before this look, so a follower's copy looked at after it holds at least
        # as much (`unacknowledged`).
        for name, consumer in self.c.consumers.items():
            self.consumers.setdefault(name, []).append((at, consumer.size()))
        for i in IDS:
            status = self.c.dumpers.status(i)
            proc = self.c.dumpers.procs.get(i)
            ha = status.get("ha", {}) if proc is not None and proc.poll() is None else {}
            acks = [a["age_s"] for a in (ha.get("acknowledged") or {}).values()]
            self.dumpers[i].append(
                Seen(
                    at,
                    ha.get("role", ""),
                    ha.get("term", 0),
                    status.get("transactions", 0) if ha.get("role") == "leader" else 0,
                    bool(ha.get("ack_gate_degraded")),
                    int(ha.get("ack_gate_gave_up") or 0),
                    min(acks) if acks else None,
                    (ha["file"], ha["position"]) if ha.get("file") else None,
                    binlog_bytes(self.c.dumpers.binlog(i)),
                )
            )

    # -- judging ------------------------------------------------------------------------------
    def between(self, i: int, t0: float, t1: float) -> list[Seen]:
        return [s for s in self.dumpers[i] if t0 <= s.at <= t1]

    def at(self, i: int, t: float) -> Seen:
        """Dumper i's last sample at or before t (its first if none was taken before t)."""
        before = [s for s in self.dumpers[i] if s.at <= t]
        return before[-1] if before else self.dumpers[i][0]

    def write_rate(self, i: int, t0: float, t1: float) -> float:
        """Transactions per second dumper i wrote between t0 and t1 (as its status said)."""
        seen = [s for s in self.between(i, t0, t1) if s.role == "leader"]
        if len(seen) < 2 or seen[-1].at <= seen[0].at:
            return 0.0
        return (seen[-1].transactions - seen[0].transactions) / (seen[-1].at - seen[0].at)

    def read_rate(self, name: str, t0: float, t1: float) -> float:
        """Bytes per second consumer `name` received between t0 and t1."""
        seen = [(t, n) for t, n in self.consumers.get(name, []) if t0 <= t <= t1]
        if len(seen) < 2 or seen[-1][0] <= seen[0][0]:
            return 0.0
        return (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])

    def unacknowledged(
        self, name: str, follower: int, t0: float, t1: float
    ) -> tuple[float, int] | None:
        """The first sample (time, bytes) between t0 and t1 at which consumer `name` held
        more than the follower's copy: data served that no follower held. (Both are sums of
        file sizes: the same names, the same bytes.) Only meaningful while the leader's gate
        did not give up — and its status says so up to a second late."""
        copy = {s.at: s.on_disk for s in self.dumpers[follower]}
        for t, n in self.consumers.get(name, []):
            if t0 <= t <= t1 and t in copy and n > copy[t]:
                return t, n - copy[t]
        return None

    def first_degraded(self, leader: int, after: float = float("-inf")) -> float | None:
        """When the leader's status first said its gate gave up (after `after`)."""
        return next(
            (s.at for s in self.dumpers[leader] if s.at >= after and (s.degraded or s.gave_up)),
            None,
        )

    def size_at(self, name: str, t: float) -> int:
        before = [n for at, n in self.consumers.get(name, []) if at <= t]
        return before[-1] if before else 0

    def stalls(self, name: str, t0: float, t1: float) -> list[tuple[float, float]]:
        """The spans between t0 and t1 in which consumer `name` received nothing, longest
        first (from the sample its size last changed at, to the one it changed at next)."""
        seen = [(t, n) for t, n in self.consumers.get(name, []) if t0 <= t <= t1]
        spans, since = [], None
        for (t, n), (_, before) in zip(seen[1:], seen, strict=False):
            if n == before:
                since = since if since is not None else t
            elif since is not None:
                spans.append((since - 0.1, t))
                since = None
        if since is not None:
            spans.append((since - 0.1, seen[-1][0]))
        return sorted(spans, key=lambda s: s[0] - s[1])

    # -- the timeline -------------------------------------------------------------------------
    def render(self, every: float = 2.0) -> str:
        """Each dumper's changes of role, term and gate, the marks, and every `every` seconds
        a line of counts: transactions, the follower's copy, the consumers' bytes."""
        lines = [(t, f"-- {what}") for t, what in self.marks]
        for i in IDS:
            before = None
            for s in self.dumpers[i]:
                state = (s.role, s.term, s.degraded)
                if state != before:
                    lines.append(
                        (
                            s.at,
                            f"dumper {i}: role {s.role or '(status stale)'}, term {s.term}"
                            + (
                                ", ack gate degraded (serves unacknowledged data)"
                                if s.degraded
                                else ""
                            ),
                        )
                    )
                    before = state
        first = min((s[0].at for s in self.dumpers.values() if s), default=0.0)
        last = max((s[-1].at for s in self.dumpers.values() if s), default=0.0)
        t = first
        while t <= last + 1e-9:
            parts = []
            for i in IDS:
                s = self.at(i, t)
                if s.role == "leader":
                    age = f", newest ack {s.ack_age:.1f} s old" if s.ack_age is not None else ""
                    parts.append(f"d{i} {s.transactions} txns, {s.on_disk} B{age}")
                else:
                    parts.append(f"d{i} copy {s.on_disk} B")
            parts += [f"{n} {self.size_at(n, t)} B" for n in self.consumers]
            lines.append((t, "   " + "; ".join(parts)))
            t += every
        return "\n".join(f"{t:+7.1f}s {what}" for t, what in sorted(lines, key=lambda x: x[0]))


def torn(files: list[tuple[str, bytes]]) -> str:
    """Why these binlog bytes (file name, bytes; the last file possibly cut short) do not end
    at a transaction boundary ("" if they do): a copy served must hold whole transactions."""
    if not files:
        return ""
    name, data = files[-1]
    end = scan(data)
    if end.valid_end == len(data):
        return ""
    return (
        f"{name} ends {len(data) - end.valid_end} bytes past its last whole transaction "
        f"(at {end.valid_end} of {len(data)}: {end.reason or 'an incomplete transaction'})"
    )


def binlog_bytes(directory) -> int:
    total = 0
    for p in directory.glob("binlog.[0-9]*"):
        try:
            total += p.stat().st_size
        except FileNotFoundError:  # purged meanwhile
            pass
    return total


def snapshot(directory) -> list[tuple[str, bytes]]:
    """The binlog files in `directory`, in order, with their bytes now."""
    names = sorted(p.name for p in directory.glob("binlog.[0-9]*"))
    return [(n, (directory / n).read_bytes()) for n in names]
