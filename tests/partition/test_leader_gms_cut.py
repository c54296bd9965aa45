"""The leader cut off from the GMS (issue 39): two HA dumpers under transfers (3 threads), a
consumer following the leader (`mariadb-binlog --raw --stop-never`, on a host of its own) and a
MariaDB replica of it; then every packet between the leader's host and the GMS's host dropped
(no reset: a half-open link) for CDC_PARTITION_S seconds (default 12), while the leader still
reaches its DNs, its follower and its consumers; then the link healed.

The contract, with the lease at CDC_PARTITION_LEASE_MS (default 5000 ms; the cut outlasts it
more than twice):
- the follower takes over (within the lease and a few seconds of election);
- the old leader stops leading within the lease (+ FENCE_MARGIN_S): its status says so, or it
  has exited; never two leaders for longer than that;
- the new leader writes during the cut and after it (its transaction count grows);
- every consumer's bytes (one on the old leader, one started on the new leader after the
  takeover) are a prefix of the final leader's binlog: a consumer that read past the
  successor's history has seen a fork;
- the replica, re-pointed at the new leader where it stopped, ends equal (`cdc check`), the
  global binlog passes `cdc verify-binlog`, the follower's copy ends identical to the leader's.

Every broken rule is collected and reported together at the end with the run's timeline (times
from the cut), so that one run shows all of what fails."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

import pytest

from tests.chaos.dumpers import copies_identical
from tests.chaos.test_dumper_ha import acknowledging
from tests.partition.cluster import IDS, LEASE_MS, PartitionCluster, not_a_prefix, wait
from tests.partition.conftest import needs_hosts

pytestmark = needs_hosts

CUT_S = float(os.environ.get("CDC_PARTITION_S", "12"))
# A status file is written every second (dumper/service.py), sampled every 0.1 s; the lease
# runs out at most lease_ms after the cut (counted from the last renewal, before it).
FENCE_MARGIN_S = 1.5
ELECTION_S = 10.0  # after the lease ran out, the follower's takeover (recovery, a new term)
AFTER_HEAL_S = 30.0  # how long the run waits for writes and a follower after the heal


@dataclass
class Sample:
    at: float  # seconds after the cut
    alive: bool
    role: str  # "" when its status is stale (> 3 s old)
    term: int
    transactions: int
    degraded: bool


@dataclass
class Timeline:
    """Every dumper's status, sampled every 0.1 s from before the cut to the end of the run."""

    c: PartitionCluster
    cut_at: float = 0.0
    samples: dict[int, list[Sample]] = field(default_factory=lambda: {i: [] for i in IDS})
    marks: list[tuple[float, str]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.cut_at

    def mark(self, what: str) -> None:
        self.marks.append((self.now(), what))

    async def run(self) -> None:
        while True:
            for i in IDS:
                status = self.c.dumpers.status(i)
                ha = status.get("ha", {})
                proc = self.c.dumpers.procs.get(i)
                self.samples[i].append(
                    Sample(
                        self.now(),
                        proc is not None and proc.poll() is None,
                        ha.get("role", ""),
                        ha.get("term", 0),
                        status.get("transactions", 0),
                        bool(ha.get("ack_gate_degraded")),
                    )
                )
            await asyncio.sleep(0.1)

    def first(self, i: int, what, after: float = 0.0) -> Sample | None:
        return next((s for s in self.samples[i] if s.at >= after and what(s)), None)

    def last(self, i: int) -> Sample:
        return self.samples[i][-1]

    def at(self, i: int, t: float) -> Sample:
        """Dumper i's last sample at or before t (its first if none was taken before t)."""
        before = [s for s in self.samples[i] if s.at <= t]
        return before[-1] if before else self.samples[i][0]

    def render(self) -> str:
        """Each dumper's changes of role/term/liveness, transaction counts at those moments,
        and the marks, in time order."""
        lines = [(t, f"-- {what}") for t, what in self.marks]
        for i in IDS:
            before = None
            for s in self.samples[i]:
                state = (s.alive, s.role, s.term, s.degraded)
                if state != before:
                    lines.append(
                        (
                            s.at,
                            f"dumper {i}: {'alive' if s.alive else 'EXITED'}, "
                            f"role {s.role or '(status stale)'}, term {s.term}, "
                            f"{s.transactions} transactions"
                            + (", ack gate degraded" if s.degraded else ""),
                        )
                    )
                    before = state
            if self.samples[i]:
                s = self.samples[i][-1]
                lines.append((s.at, f"dumper {i} at the end: {s.transactions} transactions"))
        return "\n".join(f"{t:+7.1f}s {what}" for t, what in sorted(lines, key=lambda x: x[0]))


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_leader_cut_off_from_the_gms(tmp_path, hosts):
    c = PartitionCluster(tmp_path, hosts)
    problems: list[str] = []
    timeline = Timeline(c)
    sampler: asyncio.Task | None = None
    old, new = 1, 2
    lease_s = LEASE_MS / 1000
    try:
        c.start_pipeline()
        c.attach_replica()  # on dumper 1, the leader
        since = c.truth_size()
        c.start_workload("transfer")
        await c.wait_load_writes(since, workloads=1)
        await wait(lambda: acknowledging(c.dumpers.status(old)), 60, "no acknowledgement")
        consumer_old = c.consume("c1", old)
        await asyncio.sleep(3)  # transfers flow, the consumer and the follower read them

        timeline.cut_at = time.monotonic()
        sampler = asyncio.create_task(timeline.run())
        hosts.cut(f"d{old}", "gms")
        timeline.mark(f"cut: every packet between d{old} and gms dropped, both ways")
        end_of_cut = timeline.cut_at + CUT_S
        takeover = await wait_sample(timeline, new, lambda s: s.role == "leader", end_of_cut)
        if takeover is not None:
            timeline.mark(f"dumper {new} leads: a consumer on it, the replica moved to it")
            c.consume("c2", new)
            try:
                file, pos = await asyncio.to_thread(c.repoint_replica, new, CUT_S)
                timeline.mark(f"replica re-pointed at dumper {new}, {file}:{pos}")
            except AssertionError as exc:
                problems.append(f"the replica could not be re-pointed: {exc}")
        await asyncio.sleep(max(0.0, end_of_cut - time.monotonic()))
        hosts.heal(f"d{old}", "gms")
        timeline.mark("healed")
        healed = timeline.now()
        after = time.monotonic() + AFTER_HEAL_S
        heal_count = timeline.last(new).transactions
        await wait_sample(
            timeline,
            new,
            lambda s: s.role == "leader" and s.transactions > heal_count,
            after,
        )
        await wait_sample(timeline, old, lambda s: s.role == "follower", after, after=healed)
        sampler.cancel()

        # -- judged from the timeline --------------------------------------------------------
        if takeover is None:
            problems.append(f"dumper {new} did not take over within the {CUT_S:.0f} s cut")
        elif takeover.at > lease_s + ELECTION_S:
            problems.append(f"dumper {new} took over {takeover.at:.1f} s after the cut")
        fenced = timeline.first(old, lambda s: not s.alive or (s.role and s.role != "leader"))
        if fenced is None or fenced.at > lease_s + FENCE_MARGIN_S:
            problems.append(
                f"the old leader (dumper {old}) was not seen to stop leading before "
                + (f"{fenced.at:.1f} s" if fenced else "the end")
                + f" after the cut (lease {lease_s:.1f} s; a stale status counts as leading)"
            )
        both = [
            s.at
            for s in timeline.samples[old]
            if s.role == "leader" and timeline.at(new, s.at).role == "leader"
        ]
        if both:
            spans = ", ".join(f"{a:+.1f} s to {b:+.1f} s" for a, b in spans_of(both))
            problems.append(f"two dumpers said they led: {spans}")
        served_unacked = [
            s.at for s in timeline.samples[old] if s.role == "leader" and s.degraded and s.at > 0
        ]
        if served_unacked:
            problems.append(
                f"the old leader's ack gate served unacknowledged data while its lease was in "
                f"doubt, from {served_unacked[0]:+.1f} s"
            )
        if takeover is not None:
            at_heal = timeline.at(new, healed).transactions
            if at_heal <= takeover.transactions:
                problems.append(
                    f"the new leader wrote nothing during the cut after its takeover "
                    f"({takeover.transactions} transactions at {takeover.at:+.1f} s, "
                    f"{at_heal} at the heal)"
                )
            if timeline.last(new).transactions <= at_heal:
                problems.append(
                    f"the new leader wrote nothing in the {AFTER_HEAL_S:.0f} s after the heal "
                    f"({at_heal} transactions)"
                )
        if timeline.last(old).role != "follower":
            problems.append(
                f"the old leader does not follow {AFTER_HEAL_S:.0f} s after the heal "
                f"(role {timeline.last(old).role or '(status stale)'})"
            )
        leader = c.leader()
        if leader is None:
            problems.append("no proof run: no dumper leads")
        else:
            try:
                summary = await c.prove("the leader cut from the GMS")
                print(summary)
            except AssertionError as exc:
                problems.append(f"the end-of-run proof failed: {exc}")
            if c.replica is not None and (error := c.replica_error()):
                problems.append(f"the replica: {error}")

        # -- the consumers and the copies ----------------------------------------------------
        final = c.leader() or new
        binlog = c.dumpers.binlog(final)
        if "c2" in c.consumers:
            total = sum(p.stat().st_size for p in binlog.glob("binlog.[0-9]*"))
            try:
                await wait(lambda: c.consumers["c2"].size() >= total, 30, "")
            except AssertionError:
                problems.append(
                    f"the consumer of the new leader holds {c.consumers['c2'].size()} of "
                    f"{total} bytes 30 s after the run: {c.consumers['c2'].log()}"
                )
        for name, consumer in c.consumers.items():
            consumer.stop()
            if why := not_a_prefix(consumer.dir, binlog):
                problems.append(f"consumer {name}: {why}")
        print(f"consumer c1 (on dumper {old}) read {consumer_old.size()} bytes")
        other = next(i for i in IDS if i != final)
        try:
            await wait(
                lambda: copies_identical(c.dumpers.binlog(final), c.dumpers.binlog(other)),
                30,
                "",
            )
        except AssertionError:
            problems.append(f"dumper {other}'s copy differs from the leader's 30 s after the run")
    finally:
        if sampler is not None:
            sampler.cancel()
        print(f"timeline (lease {LEASE_MS} ms, cut {CUT_S:.0f} s):\n{timeline.render()}")
        print(f"dumpers' log ends:\n{c.dumpers.tail()}")
        c.close()
    assert not problems, "\n".join(problems)


def spans_of(times: list[float], gap: float = 0.5) -> list[tuple[float, float]]:
    """Sample times merged into (first, last) spans: samples within `gap` are one span."""
    spans: list[tuple[float, float]] = []
    for t in times:
        if spans and t - spans[-1][1] <= gap:
            spans[-1] = (spans[-1][0], t)
        else:
            spans.append((t, t))
    return spans


async def wait_sample(
    timeline: Timeline, i: int, what, deadline: float, after: float = 0.0
) -> Sample | None:
    """Dumper i's first sample (after `after`, seconds from the cut) for which `what` holds,
    waited for until `deadline` (monotonic); None if none came."""
    while (found := timeline.first(i, what, after)) is None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return found
