"""The nemesis run (issue 39, part 4): two HA dumpers, transfers and orders from the CN host, a
logical DDL now and then, consumers on both dumpers (`mariadb-binlog --raw --stop-never`) and
a MariaDB replica of the leader; then, for CDC_NEMESIS_S seconds (default 80), a schedule
drawn from CDC_NEMESIS_SEED (default: the time; printed) of faults, one or two at a time, each
held a few seconds and healed (tests/partition/nemesis.py): links cut (both ways or one way),
thinned (a share dropped) or slowed between the hosts that matter (leader↔GMS,
leader↔follower, a dumper↔a DN, the CN↔a DN, a consumer↔the leader), a dumper SIGKILLed (and
started again), the GMS or a DN SIGKILLed (and started again), a dumper's binlog file system
(a tmpfs) filled (and grown; CDC_NEMESIS_DISK=0 leaves it out).

Between steps: a workload process that died is started again, a consumer that exited is
started again on the current leader (a new directory: every byte it was ever served is kept),
the replica is re-pointed at a new leader by file:pos.

The checker, after every fault healed and the proof (`Chaos.prove`: `cdc cn recover`,
catch-up, `cdc verify-binlog` — every transaction of the CN's ground truth exactly once, and no
row transaction the ground truth lacks —, `cdc check` of the replica):
- the global binlog flows again after the last heal;
- every consumer directory holds a prefix of the final leader's binlog (no fork), and each
  consumer on the final leader reads it to its end;
- the two dumpers' copies end byte-identical.
Every broken rule is collected; the seed, the schedule and what ran are printed on failure.

CDC_NEMESIS_SEED=N replays a run's schedule (the roles it names are resolved as it runs)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.chaos.dumpers import copies_identical
from tests.chaos.harness import WORKLOADS
from tests.partition.cluster import IDS, Consumer, PartitionCluster, not_a_prefix
from tests.partition.conftest import needs_hosts
from tests.partition.nemesis import Nemesis, mount_tmpfs, render, schedule

pytestmark = needs_hosts

SECONDS = float(os.environ.get("CDC_NEMESIS_S", "80"))
SEED = int(os.environ.get("CDC_NEMESIS_SEED", str(int(time.time()))))
DISK = os.environ.get("CDC_NEMESIS_DISK", "1") != "0"
SETTLE_S = 60.0  # after the last heal: a leader and a follower again


class Consumers:
    """One consumer slot per host (c1, c2): its current process and every directory it
    wrote (a new one at each restart, from the first byte of the binlog)."""

    def __init__(self, c: PartitionCluster, nemesis: Nemesis):
        self.c, self.nemesis = c, nemesis
        self.current: dict[str, tuple[Consumer, int]] = {}
        self.all: list[tuple[str, Consumer]] = []

    def start(self, host: str, dumper: int) -> None:
        n = sum(1 for h, _ in self.all if h == host)
        consumer = Consumer(self.c.hosts, self.c.hosts[host], self.c.dir / f"consumer-{host}-{n}")
        consumer.start(*self.c.dumper_address(dumper))
        self.current[host] = (consumer, dumper)
        self.all.append((host, consumer))
        self.c.consumers[f"{host}-{n}"] = consumer  # (stopped by the cluster's close)
        self.nemesis.note(f"consumer {host}-{n} started on dumper {dumper}")

    def restart_dead(self, leader: int) -> None:
        for host, (consumer, _) in list(self.current.items()):
            if consumer.proc.poll() is not None:
                self.start(host, leader)


@pytest.mark.slow
@pytest.mark.timeout(int(600 + 2 * SECONDS))  # (a 30-minute run gets 70 minutes)
async def test_nemesis(tmp_path, hosts):
    steps = schedule(SEED, SECONDS, disk=DISK)
    plan = render(steps)
    print(f"nemesis seed {SEED} (CDC_NEMESIS_SEED to replay), {SECONDS:.0f} s:\n{plan}")
    mounts = []
    if DISK:
        for i in IDS:
            mount_tmpfs(tmp_path / f"d{i}" / "binlog")
            mounts.append(tmp_path / f"d{i}" / "binlog")
    problems: list[str] = []
    c = None
    nemesis = None
    try:
        c = PartitionCluster(tmp_path, hosts)
        nemesis = Nemesis(c, DISK)
        consumers = Consumers(c, nemesis)
        c.start_pipeline()
        c.attach_replica()
        replica_on = 1
        since = c.truth_size()
        for name in WORKLOADS:
            c.start_workload(name)
        await c.wait_load_writes(since)
        nemesis.t0 = time.monotonic()  # (what ran is timed from the consumers' start)
        consumers.start("c1", 1)
        consumers.start("c2", 2)
        await asyncio.sleep(2)
        nemesis.note("the first step")
        for n, step in enumerate(steps):
            made = []
            try:
                for f in step.faults:
                    made.append(await nemesis.make(f))
                await asyncio.sleep(step.hold_s)
            except AssertionError as exc:
                problems.append(f"step {n}: {exc}")
            finally:
                for m in reversed(made):
                    await nemesis.undo(m)
            await asyncio.sleep(step.calm_s)
            replica_on = await between_steps(c, nemesis, consumers, replica_on, problems)

        # -- the end: everything healed and running, the load still on for a moment ----------
        nemesis.note("the schedule is over")
        leader = await settle(c, nemesis, problems)
        if leader is not None:
            replica_on = await between_steps(c, nemesis, consumers, replica_on, problems)
            before = c.dumpers.status(leader).get("transactions", 0)
            try:
                await c.dumpers.wait(
                    lambda: c.dumpers.status(leader).get("transactions", 0) > before + 50,
                    60,
                    "",
                )
            except AssertionError:
                problems.append(
                    f"the global binlog does not flow after the last heal: dumper {leader} "
                    f"wrote {c.dumpers.status(leader).get('transactions', 0) - before} "
                    "transactions in 60 s"
                )
            try:
                print(await c.prove("the nemesis"))
            except AssertionError as exc:
                problems.append(f"the end-of-run proof failed: {exc}")
            if error := c.replica_error():
                problems.append(f"the replica: {error}")
            await check_copies_and_consumers(c, consumers, problems)
    except BaseException as exc:
        problems.append(f"the run stopped: {type(exc).__name__}: {exc}")
        raise
    finally:
        ran = "\n".join(nemesis.ran) if nemesis else "(nothing ran)"
        report = f"nemesis seed {SEED}, {SECONDS:.0f} s; schedule:\n{plan}\nas it ran:\n{ran}"
        print(report)
        if c is not None:
            print(f"dumpers' HA decisions:\n{ha_decisions(c.dumpers.root / 'dumpers.log')}")
            print(f"dumpers' log ends:\n{c.dumpers.tail()}")
            c.close()
        for path in mounts:
            subprocess.run(["umount", "-l", str(path)], check=False)
    assert not problems, "\n".join(problems) + f"\n\n{report}"


async def between_steps(c, nemesis, consumers, replica_on: int, problems: list[str]) -> int:
    """Dead workloads and consumers started again; the replica moved to a new leader."""
    for name in WORKLOADS:
        if c.procs[name].poll() is not None:
            nemesis.note(f"workload {name} exited ({c.procs[name].returncode}): started again")
            c.start_workload(name)
    leader = c.leader()
    if leader is None:
        return replica_on
    consumers.restart_dead(leader)
    if leader != replica_on:
        try:
            file, pos = await asyncio.to_thread(c.repoint_replica, leader, 30)
            nemesis.note(f"replica re-pointed at dumper {leader}, {file}:{pos}")
            return leader
        except AssertionError as exc:
            nemesis.note(f"replica not re-pointed at dumper {leader} yet: {exc}")
    return replica_on


async def settle(c, nemesis, problems: list[str]) -> int | None:
    """Every fault healed, both dumpers running; until one leads and the other follows."""
    for key in list(c.hosts.faults):
        c.hosts.heal(*key)
    for i in IDS:
        if i not in c.dumpers.procs:
            c.dumpers.start(i)
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        leader = c.leader()
        if leader is not None and c.dumpers.role(3 - leader) == "follower":
            nemesis.note(f"settled: dumper {leader} leads, dumper {3 - leader} follows")
            return leader
        await asyncio.sleep(0.2)
    roles = {i: c.dumpers.role(i) or "(status stale)" for i in IDS}
    problems.append(f"no leader and follower {SETTLE_S:.0f} s after the last heal: {roles}")
    return c.leader()


async def check_copies_and_consumers(c, consumers: Consumers, problems: list[str]) -> None:
    final = c.leader()
    if final is None:
        problems.append("no dumper leads after the proof")
        return
    binlog = c.dumpers.binlog(final)
    other = 3 - final
    try:
        await c.dumpers.wait(lambda: copies_identical(binlog, c.dumpers.binlog(other)), 60, "")
    except AssertionError:
        problems.append(f"dumper {other}'s copy differs from the leader's 60 s after the proof")
    # each slot's consumer on the final leader reads to the end
    total = sum(p.stat().st_size for p in binlog.glob("binlog.[0-9]*"))
    for host, (consumer, dumper) in list(consumers.current.items()):
        if consumer.proc.poll() is not None or dumper != final:
            consumer.stop()
            consumers.start(host, final)
    for consumer, _ in consumers.current.values():
        try:
            await c.dumpers.wait(lambda consumer=consumer: consumer.size() >= total, 60, "")
        except AssertionError:
            problems.append(
                f"consumer {consumer.dir.name} holds {consumer.size()} of {total} bytes 60 s "
                f"after the proof: {consumer.log()}"
            )
    read = []
    for _, consumer in consumers.all:
        consumer.stop()
        read.append(f"{consumer.dir.name} {consumer.size()}")
        if why := not_a_prefix(consumer.dir, binlog):
            problems.append(f"consumer {consumer.dir.name}: {why}")
    print(f"consumers read (bytes; the final leader holds {total}): {', '.join(read)}")


HA_LINES = (
    "leader of term",
    "serving consumers data no follower holds yet",
    "serving acknowledged data only again",
    "serves past its followers' copies",
    "not taking over",
    "taking over although",
)


def ha_decisions(log: Path) -> str:
    """The dumpers' log lines that say who led which term from where, when a gate degraded or
    re-armed, and when a candidate waited for a served bound."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(line for line in lines if any(k in line for k in HA_LINES))
