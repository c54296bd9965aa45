"""Dumper HA: several dumper processes, one leader elected by a lease in the GMS, the others
followers that copy the leader's files byte for byte (COM_BINLOG_DUMP from the leader's own
dump server) and serve their copy read-only. See docs/dumper.md, "High availability".

`HaNode` is the state machine's loop: it looks at the lease and follows its holder
(`following.py`), takes it over (the election: `election.py`; the term: `leading.py`), or
waits. Where it stands is `HaState` (`state.py`: the role, the term, the lease and the fence,
no I/O); its copies and the terms they belong to are `copies.py`'s; what it says in `cdc
status` is `status.py`'s.

Several streams (`[dumper] streams` > 1, docs/streams.md "HA followers"): the lease is the
whole dumper's, so one process leads every stream (its merge feeds them all). A follower keeps
one copy per stream (`<binlog_dir>/stream<i>`), each copied from the leader's stream port
(its port + 1 + i) and acknowledged there; each stream's process records where the term began
in its stream (`binlog_dumper_stream_term`), and each copy is cut back to its own stream's start.
Members report each stream copy's end, and the election compares them stream by stream
(`dumper/ha/election.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from cdc.config import Config
from cdc.pauses import GMS, Backoff, Pauses
from dumper.ha.copies import align_copy, copy_ends, copy_targets
from dumper.ha.deps import LeaderBuilder, LeaseStore
from dumper.ha.election import member_ends, one_end, winner
from dumper.ha.following import CopyServers, Follower, FollowerProgress, LeaderCopy
from dumper.ha.leading import Leadership
from dumper.ha.peers import follower_ack_gate
from dumper.ha.served_bound import BoundRecorder, TakeoverHold
from dumper.ha.state import FencedError, HaState
from dumper.ha.takeover import TakeoverTimeline
from dumper.pipeline import Leader
from topology import Lease, Member, gms

log = logging.getLogger(__name__)


class HaNode:
    """One dumper process of an HA group: candidate → follower ⇄ leader (until fenced).

    Its dependencies are passed in (`dumper/service.py` wires the production ones, from
    `dumper.ha.deps`): `store` keeps the lease, the terms and the members (the GMS),
    `leaders` builds the pipeline of each term it wins, `copy` copies the leader's files
    while following (default: `COM_BINLOG_DUMP` from the leader's dump server)."""

    def __init__(
        self,
        config: Config,
        store: LeaseStore,
        leaders: LeaderBuilder,
        *,
        copy: Callable[[Lease], Awaitable[None]] | None = None,
        on_lead: Callable[[], Awaitable[None]] | None = None,
        pauses: Pauses | None = None,
        copy_servers: CopyServers | None = None,
    ):
        """`on_lead`: runs alongside the pipeline while this process leads; `copy_servers`:
        with several streams, the servers of the stream copies while following."""
        self.config = config
        self.pauses = pauses or Pauses()
        self.store = store
        self._leaders = leaders
        self._copy_servers = copy_servers
        d = config.dumper
        self.id = d.id
        self.address = f"{d.host}:{d.port}"
        self.dir = Path(d.binlog_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.copies = copy_targets(d)
        for c in self.copies:
            c.dir.mkdir(parents=True, exist_ok=True)
        self.state = HaState(d)
        # The DNs every term's pipeline merges (it adds those a StorageChange brings).
        self.nodes = {n.id: n for n in config.dn}
        self.progress = FollowerProgress()
        # Followers acknowledge what they copied; as leader this process serves its other
        # consumers only that (docs/dumper.md, "The leader-consumer gap"). With several
        # streams each stream's process holds the gate of its own port (stream_process.py).
        self.acks_on = d.serve_acknowledged_only and len(d.peers) > 1
        self.acks = (
            follower_ack_gate(
                d, active=self.gated, sure=lambda: time.monotonic() < self.sure_until()
            )
            if d.streams == 1
            else None
        )
        # A degraded gate serves no further than a bound recorded in the GMS first (with
        # several streams each stream process records its own: stream_term.py), and a
        # candidate behind the standing bound of any stream waits (served_bound.py).
        self.bounds = BoundRecorder(d, store, self.acks) if self.acks is not None else None
        if self.bounds is not None:
            self.acks.bound = self.bounds.current
        self.hold = (
            TakeoverHold(d, store, self.copies, self.align_with_terms) if self.acks_on else None
        )
        self.leader_copy = LeaderCopy(config, self.copies, self.progress, self.acks_on)
        self.follower = Follower(
            config,
            self.state,
            store,
            copy or self.leader_copy,
            self.align_with_terms,
            leaders.standby,
            self.copies,
            self.progress,
            copy_servers,
        )
        self.leadership = Leadership(
            config,
            self.state,
            store,
            leaders,
            self.copies,
            self.nodes,
            self.align_with_terms,
            on_lead=on_lead,
            copy_servers=copy_servers,
            acks=self.acks,
            bounds=self.bounds,
        )

    # -- what the rest of the process reads ---------------------------------------------------
    @property
    def role(self) -> str:
        return self.state.role

    @property
    def term(self) -> int:
        return self.state.term

    @property
    def leader(self) -> Leader | None:
        """The pipeline of the term this process leads (None: it does not lead)."""
        return self.state.leader

    @property
    def took_over_at(self) -> float | None:
        return self.state.took_over_at

    def current_notify(self) -> asyncio.Event:
        leader = self.state.leader
        return leader.notify if leader is not None else self.leader_copy.notify

    def read_only(self) -> bool:
        return self.state.role != "leader"

    def gated(self) -> bool:
        """Whether consumers are served only what followers acknowledged (`HaState.gated`)."""
        return self.state.gated()

    def sure_until(self) -> float:
        """Until when (monotonic) the lease is surely held (`HaState.sure_until`)."""
        return self.state.sure_until()

    # -- main loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        backoff = Backoff()
        while True:  # a GMS away at start is waited for
            try:
                await self.store.migrate()
                break
            except gms.UNREACHABLE as exc:
                self.pauses.begin(GMS, f"HA: migrating the GMS: {exc}")
                await asyncio.sleep(backoff.next())
        self.pauses.end(GMS)
        reporter = asyncio.create_task(self._report_loop(), name="ha-report")
        try:
            while True:
                try:
                    await self._turn()
                except gms.UNREACHABLE as exc:
                    # Not leading (a leader's term ends by fencing): wait for the GMS, then
                    # look at the lease again.
                    self.pauses.begin(GMS, f"HA: reading the lease: {exc}")
                    self.state.lost()  # a term that failed to start
                    await asyncio.sleep(backoff.next())
                    continue
                if self.pauses.active(GMS) and self.state.role != "leader":
                    self.pauses.end(GMS)
                backoff.reset()
        finally:
            reporter.cancel()
            with contextlib.suppress(BaseException):
                await reporter
            if self._copy_servers is not None:
                await self._copy_servers.stop()
            await self._leaders.close()

    async def _turn(self) -> None:
        """One look at the lease: follow its holder, take it over, or wait a little."""
        state = self.state
        lease = await self.store.current()
        if lease is not None and lease.live and lease.holder != self.id:
            if self.hold is not None:
                self.hold.waiting = None  # someone leads: nothing to wait for
            await self.follower.follow(lease)
            return
        if lease is None or not lease.live:
            state.lease_free_at = state.lease_free_at or time.monotonic()
        if (lease is None or not lease.live) and await self.may_take_over():
            term = await self.store.try_acquire(self.id, self.address, self.config.dumper.lease_ms)
            if term is not None:
                try:
                    await self.leadership.lead(term, self._timeline(term))  # ends by raising
                except FencedError as exc:
                    # Its writer is closed; whoever leads now cuts our copy back to
                    # where their term began before we follow (`align_with_terms`).
                    log.error("%s; following again", exc)
                    state.lost()
        await asyncio.sleep(self.config.dumper.lease_renew_ms / 1000 / 4)

    def _timeline(self, term: int) -> TakeoverTimeline:
        """Counted from when the old leader was last heard, if this process was copying from
        it lately; else from when it saw the lease free."""
        now = time.monotonic()
        free = self.state.lease_free_at or now
        copied_at = self.leader_copy.copied_at
        if copied_at and now - copied_at < 2 * self.config.dumper.lease_ms / 1000:
            timeline = TakeoverTimeline(self.id, copied_at, "the old leader's last copied data")
            timeline.mark("lease expiry noticed", free)
        else:
            timeline = TakeoverTimeline(self.id, free, "the lease seen free")
        timeline.term = term
        timeline.mark("lease won", now)
        self.state.lease_free_at = None
        return timeline

    async def may_take_over(self) -> bool:
        """Only the live member whose copy reaches furthest takes over (`election.winner`:
        with several streams, furthest in the most streams), so followers of the old leader
        lose as little as possible; and not while its copy (of any stream) ends before how
        far a degraded gate served (`TakeoverHold`)."""
        stale_s = self.config.dumper.lease_ms / 1000
        candidates = {self.id: self.copy_ends()}
        for m in await self.store.members():
            if m.dumper_id == self.id or m.age_s > stale_s or m.role == "leader":
                continue
            candidates[m.dumper_id] = member_ends(m)
        if winner(candidates) != self.id:
            return False
        return self.hold is None or await self.hold.allows()

    def copy_ends(self) -> list[tuple[str, int]]:
        """How far each copy of this process reaches (one: the single global binlog)."""
        return copy_ends(self.copies, self.config.dumper.binlog_base)

    async def align_with_terms(self, upto: int) -> bool:
        """Cut each copy back to the start of every recorded term after the one it was copied
        from, up to `upto`. Returns whether term `upto` has recorded its start in every copy's
        stream (a term that never did wrote nothing)."""
        d = self.config.dumper
        recorded = all([await align_copy(d, self.store, c, upto) for c in self.copies])
        if recorded:
            self.state.aligned_with(upto)
        return recorded

    async def _report_loop(self) -> None:
        while True:
            streams: tuple[tuple[str, int], ...] = ()
            leader = self.state.leader
            if leader is not None and self.copies[0].stream is None:
                file, pos = leader.writer.file, leader.writer.position
            else:  # (the streams' writers write this process's stream directories)
                ends = self.copy_ends()
                file, pos = one_end(ends)
                if self.copies[0].stream is not None:
                    streams = tuple(ends)
            state = self.state
            member = Member(self.id, self.address, state.role, state.term, file, pos, 0.0, streams)
            with contextlib.suppress(Exception):
                await self.store.report(member)
                if state.role == "follower":
                    for m in await self.store.members():
                        if m.dumper_id == self.progress.leader_id:
                            self.progress.leader_file = m.file
                            self.progress.leader_position = m.position
            await asyncio.sleep(self.config.dumper.lease_renew_ms / 1000)
