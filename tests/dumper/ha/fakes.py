"""Fakes of HA's own interfaces (`dumper.ha.deps`): a lease store in memory (the GMS: its
clock decides expiry, a node may be cut off from it), a `LeaderBuilder` whose leaders run the
pipeline of tests/dumper/pipeline/ (fake sources, a real writer in the node's temp dir), and a
follower copy that only records what it was asked to follow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cdc.config import Config, DumperPeer, NodeConfig
from dumper.ha import HaNode
from dumper.ha.following import CopyServers
from dumper.pipeline import Leader, Term
from tests.dumper.pipeline.fakes import FakeFactory, FakeMetadata, config
from tests.dumper.pipeline.test_leader import two_dn_scripts
from topology import Lease, Member, ServedBound, TermStart

# Short enough for tests of well under two seconds, long enough that a loaded machine does
# not fence a healthy leader (it may write for LEASE_MS - MARGIN after each renewal).
LEASE_MS = 700
RENEW_MS = 50
# Over `dumper.ha.state.LEASE_MARGIN_S` (1 s, for clock drift between a dumper and the GMS):
# the fake GMS's clock is ours.
MARGIN_S = 0.2


@dataclass
class FakeGms:
    """The lease, terms and members of `DumperLeaseStore`, by the GMS's clock (ours)."""

    holder: int = 0
    address: str = ""
    epoch: int = 0
    expires_at: float = 0.0
    terms: list[TermStart] = field(default_factory=list)
    reported: dict[int, tuple[Member, float]] = field(default_factory=dict)
    log: list[tuple[int, str]] = field(default_factory=list)  # (dumper id, operation)
    # Called with the holder when a dumper acquires the lease, before it learns its term: a
    # test looks at the old leader at that very moment.
    on_acquire: list[Callable[[int], None]] = field(default_factory=list)
    # term (or (term, stream)) → served bound
    served: dict[int | tuple[int, int], tuple[str, int]] = field(default_factory=dict)

    def live(self) -> bool:
        return self.epoch > 0 and self.expires_at > time.monotonic()

    def hold(self, holder: int, address: str, lease_ms: int = LEASE_MS) -> int:
        """Another dumper (not a node of the test) takes the lease; returns its term."""
        self.holder, self.address, self.epoch = holder, address, self.epoch + 1
        self.expires_at = time.monotonic() + lease_ms / 1000
        return self.epoch

    def calls(self, dumper_id: int, operation: str) -> int:
        return self.log.count((dumper_id, operation))


class FakeLeaseStore:
    """One dumper's `LeaseStore` on a shared `FakeGms`. `cut()` makes every call hang (a GMS
    this process cannot reach, or a process that is gone) until `restore()`."""

    def __init__(self, gms: FakeGms, dumper_id: int):
        self.gms, self.id = gms, dumper_id
        self.renew_s = 0.0  # how long a renewal takes to answer (a slow GMS)
        self._reachable = asyncio.Event()
        self._reachable.set()

    def cut(self) -> None:
        self._reachable.clear()

    def restore(self) -> None:
        self._reachable.set()

    async def _reach(self, operation: str) -> FakeGms:
        await self._reachable.wait()
        self.gms.log.append((self.id, operation))
        return self.gms

    async def migrate(self) -> None:
        await self._reach("migrate")

    async def current(self) -> Lease | None:
        g = await self._reach("current")
        if not g.epoch:
            return None
        remaining = g.expires_at - time.monotonic()
        return Lease(g.holder, g.address, g.epoch, remaining > 0, remaining)

    async def try_acquire(self, holder: int, address: str, lease_ms: int) -> int | None:
        g = await self._reach("try_acquire")
        if g.live():
            return None
        for hook in g.on_acquire:
            hook(holder)
        return g.hold(holder, address, lease_ms)

    async def renew(self, holder: int, term: int, lease_ms: int) -> bool:
        g = await self._reach("renew")
        await asyncio.sleep(self.renew_s)
        if (g.holder, g.epoch) != (holder, term) or not g.live():
            return False
        g.expires_at = time.monotonic() + lease_ms / 1000
        return True

    async def release(self, holder: int, term: int) -> None:
        g = await self._reach("release")
        if (g.holder, g.epoch) == (holder, term):
            g.expires_at = time.monotonic()

    async def record_term(self, start: TermStart) -> None:
        (await self._reach("record_term")).terms.append(start)

    async def terms_after(self, term: int, stream: int | None = None) -> list[TermStart]:
        g = await self._reach("terms_after")
        after = (t for t in g.terms if t.term > term and t.stream == stream)
        return sorted(after, key=lambda t: t.term)

    async def report(self, member: Member) -> None:
        (await self._reach("report")).reported[member.dumper_id] = (member, time.monotonic())

    async def members(self) -> list[Member]:
        g = await self._reach("members")
        now = time.monotonic()
        return [replace(m, age_s=now - at) for _, (m, at) in sorted(g.reported.items())]

    async def record_served(
        self, term: int, holder: int, file: str, position: int, stream: int | None = None
    ) -> bool:
        g = await self._reach("record_served")
        if (g.holder, g.epoch) != (holder, term) or not g.live():
            return False
        g.served[term if stream is None else (term, stream)] = (file, position)
        return True

    async def served_bounds(
        self, stream: int | None = None
    ) -> list[tuple[TermStart, ServedBound | None]]:
        g = await self._reach("served_bound")
        starts = sorted((t for t in g.terms if t.stream == stream), key=lambda t: t.term)
        key = (lambda t: t.term) if stream is None else (lambda t: (t.term, stream))
        return [
            (t, ServedBound(t.term, t.dumper_id, *g.served[key(t)], stream))
            if key(t) in g.served
            else (t, None)
            for t in starts
        ]


class FakeLeaders:
    """`LeaderBuilder`: each term's `Leader` merges the same two fake DNs (transactions 100,
    200, 300) into the node's binlog dir; checkpoints survive from term to term."""

    def __init__(self, config: Config):
        self.config = config
        self.metadata = FakeMetadata()
        self.built: list[Leader] = []
        self.standbys = 0
        self.closed = False

    async def standby(self) -> None:
        self.standbys += 1

    def build(self, nodes: dict[int, NodeConfig], term: Term) -> Leader:
        leader = Leader(
            self.config,
            factory=FakeFactory(two_dn_scripts()),
            metadata=self.metadata,
            nodes=nodes,
            term=term,
        )
        self.built.append(leader)
        return leader

    async def close(self) -> None:
        self.closed = True


class FakeCopy:
    """A follower's copy that copies nothing: records each lease it follows, then waits."""

    def __init__(self) -> None:
        self.leases: list[Lease] = []

    async def __call__(self, lease: Lease) -> None:
        self.leases.append(lease)
        await asyncio.Event().wait()


@dataclass
class Node:
    """One HA dumper process of a test, with its fakes and its `run` task."""

    ha: HaNode
    store: FakeLeaseStore
    leaders: FakeLeaders
    copy: FakeCopy
    task: asyncio.Task | None = None

    @property
    def leader(self) -> Leader:
        return self.leaders.built[-1]


class Cluster:
    """The HA nodes of a test on one `FakeGms`; each node's binlog dir is under `root`."""

    def __init__(self, root: Path):
        self.root = root
        self.gms = FakeGms()
        self.nodes: dict[int, Node] = {}

    def node(
        self,
        dumper_id: int,
        start: bool = True,
        on_lead: Callable[[], Awaitable[None]] | None = None,
        copy_servers: CopyServers | None = None,
        peers: tuple[int, ...] = (),
        degraded_takeover_after_s: float = 0.0,
    ) -> Node:
        """`on_lead`: what runs beside each term's pipeline (the production one: heartbeats);
        `copy_servers`: a multi-stream follower's (`HaNode`'s); `peers`: the group's dumper
        ids (two or more: the ack gate is on, so is `TakeoverHold`)."""
        cfg = config(self.root / f"dumper{dumper_id}")
        cfg.dumper.id, cfg.dumper.port = dumper_id, 3300 + dumper_id
        cfg.dumper.lease_ms, cfg.dumper.lease_renew_ms = LEASE_MS, RENEW_MS
        cfg.dumper.peers = [
            DumperPeer(i, port=3300 + i, binlog_dir=str(self.root / f"dumper{i}")) for i in peers
        ]
        cfg.dumper.degraded_takeover_after_s = degraded_takeover_after_s
        store, leaders, copy = FakeLeaseStore(self.gms, dumper_id), FakeLeaders(cfg), FakeCopy()
        ha = HaNode(cfg, store, leaders, copy=copy, on_lead=on_lead, copy_servers=copy_servers)
        node = Node(ha, store, leaders, copy)
        self.nodes[dumper_id] = node
        if start:
            self.start(node)
        return node

    def start(self, node: Node) -> None:
        node.task = asyncio.create_task(node.ha.run(), name=f"ha-{node.ha.id}")

    async def until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait for `condition`; a node whose `run` ended meanwhile fails the test with what
        ended it (it only ends by raising)."""
        async with asyncio.timeout(timeout):
            while not condition():
                for node in self.nodes.values():
                    if node.task is not None and node.task.done():
                        node.task.result()
                        raise AssertionError(f"dumper {node.ha.id}: run() returned")
                await asyncio.sleep(0.005)

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc) -> None:
        tasks = [n.task for n in self.nodes.values() if n.task is not None]
        for n in self.nodes.values():
            n.store.restore()  # a leader's stop releases its lease: not into a hang
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
