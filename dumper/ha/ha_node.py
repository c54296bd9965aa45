"""Dumper HA: several dumper processes, one leader elected by a lease in the GMS, the others
followers that copy the leader's files byte for byte (COM_BINLOG_DUMP from the leader's own
dump server) and serve their copy read-only. See docs/dumper.md, "High availability".

Fencing: the leader renews its lease every `lease_renew_ms`; the lease expires `lease_ms` after
the GMS received the last renewal, and the leader stops writing `LEASE_MARGIN_S` before its own
clock says that, counting from *before* it sent the renewal. So a follower (which can only
take the lease once the GMS clock passed `expires_at`) never writes while the old leader does.

Stepping down (docs/faults.md, "Partitions"): a leader whose lease ran out steps down at once,
before it waits for anything its term started (a heartbeat blocked on a cut GMS link must not
hold the fence): nothing more is written, not even a STOP event (a byte only its copy would
hold), and until its copy is aligned with the term that follows it serves consumers only what a
follower acknowledged. While its lease is in doubt (a renewal overdue) it never gives up waiting
for acknowledgements either (`HaNode.sure_until`, published to the server process).

Copies of different terms: each new term records where it began (`binlog_dumper_term`). A copy
that holds bytes of an older term past that point (it followed the old leader further than the
new leader had copied) is cut back to it before it follows the new leader.

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
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from binlog_writer import BinlogCopier, CopyError, layout, truncate_copy
from cdc.config import Config, DumperConfig
from cdc.files import write_atomically
from cdc.pauses import GMS, Backoff, Pauses
from cdc.protocol import BinlogPosition, DumpClient, DumpError, DumpSettings
from cdc.streams import STREAM_PROGRESS_FILE, stream_dir
from cdc.tasks import cancel_and_wait
from dumper.ha.deps import LeaderBuilder, LeaseStore
from dumper.ha.election import member_ends, one_end, order, winner
from dumper.ha.stream_tail import catch_up, stream_port_address
from dumper.ha.takeover import TakeoverTimeline
from dumper.pipeline import Leader, LeaderError, Term
from dumper.server import AckGate, ack_packet
from topology import Lease, Member, TermStart, gms

log = logging.getLogger(__name__)

LEASE_MARGIN_S = 1.0
# The lease is sure (the ack gate may serve what no follower holds yet, after `ack_wait_ms`)
# for this many renew intervals after a renewal was sent that the GMS confirmed: one renewal
# overdue and the leader serves acknowledged data only.
SURE_RENEWALS = 1.5
# How long a term's tasks get to end after the term; what still runs then is left behind (it
# can write nothing: the fence refuses every write once the node stepped down).
STEP_DOWN_GRACE_S = 2.0
STATE_FILE = "ha-state.json"  # the term whose stream this copy is a prefix of
FOLLOWER_SERVER_ID_BASE = 9900  # dump clients of followers register as base + dumper id
# The leader's 1236 for a file it does not list (binlog_sender.MSG_UNKNOWN_FILE, MySQL's text).
MSG_PURGED = "Could not find first log file name"


class CopyServers(Protocol):
    """The servers of a multi-stream follower's copies (`dumper.ha.stream_term`)."""

    def start(self) -> None: ...
    async def stop(self) -> None: ...


class FencedError(LeaderError):
    """This dumper lost its lease: it stopped writing and goes back to following."""


@dataclass(slots=True)
class FollowerProgress:
    leader: str = ""
    leader_id: int = 0
    file: str = ""
    position: int = 0
    leader_file: str = ""
    leader_position: int = 0
    last_copy_at: float = 0.0


@dataclass(frozen=True, slots=True)
class CopyTarget:
    """One copy this process keeps: the single global binlog (`stream` None) or one stream of
    a multi-stream binlog."""

    stream: int | None
    dir: Path

    def leader_address(self, lease: Lease) -> str:
        """Where the leader serves what this copy follows: its port, or its stream's port
        (port + 1 + stream: `[dumper] stream_port` is 0 with peers, cdc/config.py)."""
        if self.stream is None:
            return lease.address
        return stream_port_address(lease.address, self.stream)


def copy_targets(d: DumperConfig) -> list[CopyTarget]:
    """The copies a follower of dumper config `d` keeps (and a re-seed replaces): the global
    binlog in its binlog directory, or one per stream in `<binlog_dir>/stream<i>`."""
    if d.streams > 1:
        return [CopyTarget(i, stream_dir(d, i)) for i in range(d.streams)]
    return [CopyTarget(None, Path(d.binlog_dir))]


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
        self.config = config
        self.pauses = pauses or Pauses()
        self.store = store
        self._leaders = leaders
        self._copy_from = copy or self._copy
        self._on_lead = on_lead  # runs alongside the pipeline while this process leads
        # Several streams: the servers of the stream copies while following (their ports are
        # the leading stream processes' while this process leads).
        self._copy_servers = copy_servers
        self.id = config.dumper.id
        self.address = f"{config.dumper.host}:{config.dumper.port}"
        self.dir = Path(config.dumper.binlog_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        d = config.dumper
        self.copies = copy_targets(d)
        for c in self.copies:
            c.dir.mkdir(parents=True, exist_ok=True)
        self.role = "candidate"
        self.term = 0
        self.leader: Leader | None = None
        # The DNs every term's pipeline merges (it adds those a StorageChange brings).
        self.nodes = {n.id: n for n in config.dn}
        self.progress = FollowerProgress()
        self.notify = asyncio.Event()
        self.took_over_at: float | None = None  # wall time this process became leader
        self._valid_until = 0.0
        self._renewed_at = 0.0  # monotonic: when the last renewal the GMS confirmed was sent
        self._stepped_down = True  # no term of ours runs: the fence refuses every write
        # A term this process led whose successor's start its copy is not yet cut back to:
        # until then its copy may hold bytes beyond the history that goes on, and it serves
        # only what followers acknowledged.
        self._unaligned_term: int | None = None
        self._stop_lead = asyncio.Event()
        self._copied_at = 0.0  # monotonic: the leader was last heard (copy data or heartbeat)
        self._lease_free_at: float | None = None  # monotonic: first saw the lease expired
        self._purged_hint = 0  # the term whose leader was found without our next file
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

    def current_notify(self) -> asyncio.Event:
        return self.leader.notify if self.leader is not None else self.notify

    def visible_end(self, name: str) -> int | None:
        return self.leader.writer.visible_end(name) if self.leader is not None else None

    def read_only(self) -> bool:
        return self.role != "leader"

    def gated(self) -> bool:
        """Whether consumers are served only what followers acknowledged (the ack gate
        applies): while leading, and after a term until the copy is aligned with the next."""
        return self.role == "leader" or self._unaligned_term is not None

    def sure_until(self) -> float:
        """Until when (monotonic) this process surely holds its lease: the ack gate may serve
        unacknowledged data only before then. 0 when not leading."""
        if self.role != "leader" or self._stepped_down:
            return 0.0
        renew_s = self.config.dumper.lease_renew_ms / 1000
        return min(self._valid_until, self._renewed_at + SURE_RENEWALS * renew_s)

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
                    self.leader, self.role = None, "candidate"  # a term that failed to start
                    await asyncio.sleep(backoff.next())
                    continue
                if self.pauses.active(GMS) and self.role != "leader":
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
        lease = await self.store.current()
        if lease is not None and lease.live and lease.holder != self.id:
            await self._follow(lease)
            return
        if lease is None or not lease.live:
            self._lease_free_at = self._lease_free_at or time.monotonic()
        if (lease is None or not lease.live) and await self._may_take_over():
            term = await self.store.try_acquire(self.id, self.address, self.config.dumper.lease_ms)
            if term is not None:
                try:
                    await self._lead(term, self._timeline(term))  # only ends by raising
                except FencedError as exc:
                    # Its writer is closed; whoever leads now cuts our copy back to
                    # where their term began before we follow (`_follow`).
                    log.error("%s; following again", exc)
                    self.leader, self.role = None, "candidate"
        await asyncio.sleep(self.config.dumper.lease_renew_ms / 1000 / 4)

    def _timeline(self, term: int) -> TakeoverTimeline:
        """Counted from when the old leader was last heard, if this process was copying from
        it lately; else from when it saw the lease free."""
        now = time.monotonic()
        free = self._lease_free_at or now
        if self._copied_at and now - self._copied_at < 2 * self.config.dumper.lease_ms / 1000:
            timeline = TakeoverTimeline(
                self.id, self._copied_at, "the old leader's last copied data"
            )
            timeline.mark("lease expiry noticed", free)
        else:
            timeline = TakeoverTimeline(self.id, free, "the lease seen free")
        timeline.term = term
        timeline.mark("lease won", now)
        self._lease_free_at = None
        return timeline

    async def _may_take_over(self) -> bool:
        """Only the live member whose copy reaches furthest takes over (`election.winner`:
        with several streams, furthest in the most streams), so followers of the old leader
        lose as little as possible."""
        stale_s = self.config.dumper.lease_ms / 1000
        candidates = {self.id: self._copy_ends()}
        for m in await self.store.members():
            if m.dumper_id == self.id or m.age_s > stale_s or m.role == "leader":
                continue
            candidates[m.dumper_id] = member_ends(m)
        return winner(candidates) == self.id

    def _copy_ends(self) -> list[tuple[str, int]]:
        """How far each copy of this process reaches (one: the single global binlog)."""
        return [self._end_of(c) for c in self.copies]

    def _copy_end(self) -> tuple[str, int]:
        """How far this process's copy reaches, as one file:position (`election.one_end`)."""
        return one_end(self._copy_ends())

    def _end_of(self, copy: CopyTarget) -> tuple[str, int]:
        names = layout.read_index(copy.dir, self.config.dumper.binlog_base)
        if not names:
            return "", 0
        path = copy.dir / names[-1]
        return names[-1], path.stat().st_size if path.exists() else 0

    async def _report_loop(self) -> None:
        while True:
            streams: tuple[tuple[str, int], ...] = ()
            if self.leader is not None and self.copies[0].stream is None:
                file, pos = self.leader.writer.file, self.leader.writer.position
            else:  # (the streams' writers write this process's stream directories)
                ends = self._copy_ends()
                file, pos = one_end(ends)
                if self.copies[0].stream is not None:
                    streams = tuple(ends)
            member = Member(self.id, self.address, self.role, self.term, file, pos, 0.0, streams)
            with contextlib.suppress(Exception):
                await self.store.report(member)
                if self.role == "follower":
                    for m in await self.store.members():
                        if m.dumper_id == self.progress.leader_id:
                            self.progress.leader_file = m.file
                            self.progress.leader_position = m.position
            await asyncio.sleep(self.config.dumper.lease_renew_ms / 1000)

    # -- follower -----------------------------------------------------------------------------
    async def _align_with_terms(self, upto: int) -> bool:
        """Cut each copy back to the start of every recorded term after the one it was copied
        from, up to `upto`. Returns whether term `upto` has recorded its start in every copy's
        stream (a term that never did wrote nothing)."""
        recorded = [await self._align_copy(c, upto) for c in self.copies]
        if all(recorded) and self._unaligned_term is not None and upto > self._unaligned_term:
            self._unaligned_term = None  # a prefix of the term that goes on: served whole
        return all(recorded)

    async def _align_copy(self, copy: CopyTarget, upto: int) -> bool:
        state = read_state_term(copy.dir)
        if state >= upto:
            # Already a prefix of that term's stream: a follower restarted (or re-seeded, or
            # whose dump broke) within the term copies on (terms_after(state) lacks `upto`).
            return True
        terms = await self.store.terms_after(state, copy.stream)
        terms = [t for t in terms if t.term <= upto]
        if terms:
            first = min(terms, key=lambda t: order(t.file, t.position))
            await asyncio.to_thread(self._cut_copy, copy, first)
        recorded = any(t.term == upto for t in terms)
        if recorded:
            save_state_term(copy.dir, upto)
        return recorded

    def _cut_copy(self, copy: CopyTarget, start: TermStart) -> None:
        end = order(*self._end_of(copy))
        base = self.config.dumper.binlog_base
        if end > order(start.file, start.position) and truncate_copy(
            copy.dir, base, start.file, start.position
        ):
            log.warning(
                "dumper %d: cut the copy in %s back to %s:%d where term %d began",
                self.id,
                copy.dir,
                start.file,
                start.position,
                start.term,
            )

    async def _follow(self, lease: Lease) -> None:
        """Copy the leader's files until its lease ends or another term begins."""
        if self.role != "follower" or self.term != lease.term:
            log.info(
                "dumper %d: following dumper %d at %s (term %d)",
                self.id,
                lease.holder,
                lease.address,
                lease.term,
            )
        self.role, self.term = "follower", lease.term
        await self._leaders.standby()
        self.progress.leader, self.progress.leader_id = lease.address, lease.holder
        if not await self._align_with_terms(lease.term):
            await asyncio.sleep(0.1)  # the new leader records its start right after the lease
            return
        copy = asyncio.create_task(self._copy_from(lease), name="ha-copy")
        renew_s = self.config.dumper.lease_renew_ms / 1000
        now: Lease | None = lease
        try:
            if self._copy_servers is not None:
                self._copy_servers.start()  # (in the background; a no-op while they run)
            while not copy.done():
                # Look again when the lease would run out if not renewed meanwhile: a dead
                # leader's lease is seen expired within ~50 ms, not up to a renew interval.
                wait = min(renew_s, max(0.05, now.remaining_s + 0.02)) if now else renew_s
                await asyncio.wait([copy], timeout=wait)
                now = await self.store.current()
                if now is None or not now.live or now.term != lease.term:
                    if now is None or not now.live:
                        self._lease_free_at = time.monotonic()
                    return
            copy.result()
        except (DumpError, CopyError, ConnectionError, OSError) as exc:
            if MSG_PURGED in str(exc):
                # Retried, but in vain until the copy is seeded again: said once per term.
                if self._purged_hint != lease.term:
                    self._purged_hint = lease.term
                    log.error(
                        "dumper %d: dumper %d at %s no longer has the file this copy continues "
                        "in (%s:%d; purged while this dumper was away): stop this dumper, run "
                        "`cdc ha reseed --dumper-id %d` and start it again",
                        self.id,
                        lease.holder,
                        lease.address,
                        *self._copy_end(),
                        self.id,
                    )
            else:
                log.warning("dumper %d: copy from %s stopped: %s", self.id, lease.address, exc)
            await asyncio.sleep(1.0 if MSG_PURGED in str(exc) else 0.2)
        finally:
            copy.cancel()
            with contextlib.suppress(BaseException):
                await copy

    async def _copy(self, lease: Lease) -> None:
        """Copy every stream this process keeps; the first that ends ends them all, as the
        single copy's end does (the follower then looks at the lease again and copies on)."""
        if len(self.copies) == 1:
            await self._copy_one(lease, self.copies[0])
            return
        tasks = [
            asyncio.create_task(self._copy_one(lease, c), name=f"ha-copy-stream{c.stream}")
            for c in self.copies
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(tasks)
            # Every copy's error is looked at (a leader that died ends them all); the first
            # one is raised.
            errors = [t.exception() for t in tasks if t.done() and not t.cancelled()]
        for error in errors:
            if error is not None:
                raise error

    async def _copy_one(self, lease: Lease, target: CopyTarget) -> None:
        d = self.config.dumper
        if target.stream is not None:
            # A copy ends at its last whole transaction: a progress this process saved when
            # it led this stream (an older term) says nothing of what the copy holds now.
            (target.dir / STREAM_PROGRESS_FILE).unlink(missing_ok=True)
        copier = BinlogCopier(target.dir, base=d.binlog_base)
        file, pos = copier.resume_point()
        settings = leader_dump_settings(d, lease, address=target.leader_address(lease))
        client = DumpClient(settings, BinlogPosition(file, pos))
        acker = (
            asyncio.create_task(self._ack_loop(client, copier), name="ha-ack")
            if self.acks_on
            else None
        )
        acked = copier.synced
        try:
            async for batch in client.batches():
                self._copied_at = time.monotonic()
                for ev in batch:
                    copier.add(ev.file, ev.pos, ev.data)
                if acker is None:
                    copier.maybe_sync()
                else:
                    # The leader holds its consumers back until we acknowledge: fsync each
                    # batch (one per read from the socket: group commit) and say so at once.
                    copier.sync()
                    if copier.synced != acked:
                        acked = copier.synced
                        client.reply(ack_packet(*acked))
                if target.stream is None:
                    self.progress.file, self.progress.position = copier.file, copier.pos
                self.progress.last_copy_at = time.time()
                self.notify.set()
                self.notify = asyncio.Event()
        finally:
            if acker is not None:
                await cancel_and_wait([acker])
            copier.close()
            await client.close()

    async def _ack_loop(self, client: DumpClient, copier: BinlogCopier) -> None:
        """Repeat the acknowledgement while nothing new arrives: the leader counts a follower
        only while it heard from it within `lease_ms`."""
        every = self.config.dumper.lease_ms / 1000 / 5
        while True:
            if copier.synced[0]:
                client.reply(ack_packet(*copier.synced))
            await asyncio.sleep(every)

    # -- leader -------------------------------------------------------------------------------
    async def _lead(self, term: int, timeline: TakeoverTimeline | None = None) -> None:
        d = self.config.dumper
        self._renewed_at = time.monotonic()  # (just after the GMS granted the lease)
        self._valid_until = self._renewed_at + d.lease_ms / 1000 - LEASE_MARGIN_S
        self._stepped_down = False
        if self._copy_servers is not None:
            await self._copy_servers.stop()  # this process's stream processes take the ports
        self.role, self.term = "leader", term
        self.took_over_at = time.time()
        if self.acks is not None:
            self.acks.reset()
        # Renewed from now: what comes before the pipeline runs (fetching stream tails,
        # recovering the copy) may take a good part of the lease.
        tasks = [asyncio.create_task(self._renew_loop(term), name="lease")]
        try:
            leader, where = await self._begin_term(term, timeline, tasks[0])
            self.leader = leader
            log.info("dumper %d: leader of term %d, writing from %s", self.id, term, where)
            tasks.append(asyncio.create_task(leader.run(), name="leader"))
            if self._on_lead is not None:
                tasks.append(asyncio.create_task(self._on_lead(), name="on-lead"))
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                t.result()
            raise LeaderError(f"{next(iter(done)).get_name()} stopped unexpectedly")
        finally:
            if time.monotonic() >= self._valid_until:
                # Fenced: stop at once, not once the term's tasks have ended (one may wait on
                # a GMS that no longer answers, seen for 23 s).
                self._step_down(term, fenced=True)
            await cancel_and_wait(tasks, grace=STEP_DOWN_GRACE_S)
            self._step_down(term, fenced=False)
            if time.monotonic() < self._valid_until:
                with contextlib.suppress(Exception):  # (TimeoutError included)
                    async with asyncio.timeout(2):  # not wait_for (ARCHITECTURE §8)
                        await self.store.release(self.id, term)

    async def _begin_term(
        self, term: int, timeline: TakeoverTimeline | None, renew: asyncio.Task
    ) -> tuple[Leader, str]:
        """The copy made ready for term `term`, and its pipeline; where it writes from."""
        # Terms between the one this copy came from and ours may have cut the stream below
        # our end (a term that never recorded its start wrote nothing).
        await self._align_with_terms(term - 1)
        if timeline is not None:
            timeline.mark("copy aligned with the terms")
        if self.copies[0].stream is not None:
            await self._catch_up_streams()
            if renew.done():
                renew.result()  # (fenced meanwhile: raises)
            if timeline is not None:
                timeline.mark("stream tails fetched")
        leader = self._leaders.build(
            self.nodes, Term(term, self._fence, timeline, sure_until=self.sure_until)
        )
        if timeline is not None:
            timeline.mark("copy recovered")
        if self.copies[0].stream is not None:
            # Each stream's writer recovers its copy in its own process, which records where
            # the term began in its stream (`dumper.streams.stream_process`).
            return leader, f"the ends of its {len(self.copies)} stream copies"
        rec = leader.writer.recovery
        start = TermStart(
            term, self.id, leader.writer.file, 4 if rec.started_new_file else leader.writer.position
        )
        await self.store.record_term(start)
        save_state_term(self.dir, term)
        if timeline is not None:
            timeline.mark("term recorded")
        return leader, f"{start.file}:{start.position}"

    async def _catch_up_streams(self) -> None:
        """Several streams: each copy brought up to the furthest live follower's in its stream
        before the term begins there (`dumper.ha.stream_tail`: the election cannot pick a
        member furthest in every stream, and the old leader served each stream's consumers as
        far as any follower acknowledged). Each dump is bounded by `lease_ms`; the lease is
        renewed meanwhile (`_lead`)."""
        d = self.config.dumper
        try:
            members = await self.store.members()
        except gms.UNREACHABLE as exc:
            log.warning("dumper %d: members not read, no stream tail fetched: %s", self.id, exc)
            return
        await catch_up(
            d,
            self.copies,
            members,
            self._end_of,
            lambda address, what: peer_dump_settings(d, address, what, non_blocking=True),
            timeout_s=max(1.0, d.lease_ms / 1000),
        )

    def _step_down(self, term: int, *, fenced: bool) -> None:
        """Stop leading term `term` now: no write passes the fence any more (a writer closed
        after this leaves no STOP event: `Leader.close`), and the server goes on gating its
        consumers by acknowledgements until the copy is aligned with the next term."""
        if self._stepped_down:
            return
        self._stepped_down = True
        self._unaligned_term = term
        self.role = "candidate"
        if fenced:
            log.warning("dumper %d: lease of term %d ran out: stepped down", self.id, term)

    def _fence(self) -> None:
        if self._stepped_down or time.monotonic() >= self._valid_until:
            raise FencedError(
                f"dumper {self.id}: the lease of term {self.term} could not be renewed within "
                f"{self.config.dumper.lease_ms} ms; stopped writing (another dumper may lead now)"
            )

    async def _renew_loop(self, term: int) -> None:
        d = self.config.dumper
        first, sent = True, time.monotonic()
        while True:
            # The first renewal goes at once: taking over (recovery of the copy, the writer)
            # may have used up much of the lease already, and a late first renewal would
            # find the lease as good as expired.
            if not first:
                # lease_renew_ms after the last renewal was SENT, not after its answer: a slow
                # answer must not push the next renewal towards the lease's end (from the
                # answer, two renewals of 0.5 s in a row fenced a healthy leader with a 3 s
                # lease: 1 s margin, 1 s cadence; seen in the nemesis run, a takeover every
                # few seconds). Never past the lease's end: the fence is raised there.
                now = time.monotonic()
                left = self._valid_until - now
                await asyncio.sleep(max(0.0, min(sent + d.lease_renew_ms / 1000 - now, left)))
            first = False
            sent = time.monotonic()
            bound = max(0.1, self._valid_until - sent)
            try:
                # Not wait_for (ARCHITECTURE §8): it could swallow the cancel of a stop.
                async with asyncio.timeout(bound):
                    ok = await self.store.renew(self.id, term, d.lease_ms)
            except (Exception, TimeoutError) as exc:  # GMS unreachable: keep trying until fenced
                # (a TimeoutError's text is empty: the log said "lease renewal failed: ")
                why = str(exc) or f"{type(exc).__name__}: no answer within {bound:.2f} s"
                log.warning("dumper %d: lease renewal failed: %s", self.id, why)
                ok = None
            if ok:
                self._renewed_at = sent
                self._valid_until = sent + d.lease_ms / 1000 - LEASE_MARGIN_S
            elif ok is False:
                self._valid_until = 0
            self._fence()


def follower_ack_gate(
    d: DumperConfig, active: Callable[[], bool], sure: Callable[[], bool] = lambda: True
) -> AckGate | None:
    """The gate of a leader's dump server: the acknowledgements of dumper `d.id`'s followers
    (None: `serve_acknowledged_only` is off, or there are no followers)."""
    if not (d.serve_acknowledged_only and len(d.peers) > 1):
        return None
    return AckGate(
        (FOLLOWER_SERVER_ID_BASE + p.id for p in d.peers if p.id != d.id),
        live_ms=d.lease_ms,
        wait_ms=d.ack_wait_ms,
        active=active,
        sure=sure,
    )


def read_state_term(directory: Path) -> int:
    """The term whose stream the copy in `directory` is a prefix of (0: none recorded)."""
    try:
        return int(json.loads((directory / STATE_FILE).read_text())["term"])
    except (OSError, ValueError, KeyError):
        return 0


def save_state_term(directory: Path, term: int) -> None:
    """Record that the copy in `directory` is a prefix of term `term`'s stream."""
    write_atomically(directory / STATE_FILE, json.dumps({"term": term}))


def leader_dump_settings(
    d: DumperConfig, lease: Lease, *, non_blocking: bool = False, address: str = ""
) -> DumpSettings:
    """The dump of the leader's files by follower `d.id` (its copy, or a re-seed of it): a
    follower's server_id, so the leader's ack gate never holds it back. `address`: where
    (default: the lease's; a stream's copy dumps from the leader's stream port)."""
    name = f"leader dumper {lease.holder}"
    return peer_dump_settings(d, address or lease.address, name, non_blocking=non_blocking)


def peer_dump_settings(
    d: DumperConfig, address: str, name: str, *, non_blocking: bool = False
) -> DumpSettings:
    """A dump by dumper `d.id` of another member's files at `address` (the leader's, or a
    follower's copy: `stream_tail`), as a follower: its server_id."""
    host, _, port = address.rpartition(":")
    return DumpSettings(
        host,
        int(port),
        d.peer_user,
        d.peer_password,
        server_id=FOLLOWER_SERVER_ID_BASE + d.id,
        name=name,
        heartbeat_period=0.5,
        idle_timeout=max(2.0, d.lease_ms / 1000),
        reconnect=False,
        keep_rotate=True,
        non_blocking=non_blocking,
    )


def ha_status(node: HaNode) -> dict:
    """The HA part of `cdc status`."""
    out = {"dumper_id": node.id, "role": node.role, "term": node.term, "address": node.address}
    if node.role == "leader":
        out["took_over_at"] = node.took_over_at
        if node.acks is not None:
            out.update(ack_status(node.acks))
        return out
    if len(node.copies) > 1:
        out["copies"] = [
            dict(zip(("stream", "file", "position"), (c.stream, *node._end_of(c)), strict=True))
            for c in node.copies
        ]
    p = node.progress
    out.update(
        leader=p.leader,
        file=p.file,
        position=p.position,
        leader_file=p.leader_file,
        leader_position=p.leader_position,
        # The leader reports every renew interval: a follower may be ahead of that report.
        behind_bytes=(
            max(0, p.leader_position - p.position)
            if p.leader_file == p.file and p.leader_file
            else None
        ),
        behind_files=(
            order(p.leader_file, 0)[0] - order(p.file, 0)[0] if p.leader_file and p.file else None
        ),
        last_copy_at=p.last_copy_at,
    )
    return out


def ack_status(gate: AckGate) -> dict:
    """What a leader's ack gate says in `cdc status`: each follower's acknowledged end."""
    return {
        "acknowledged": {
            str(sid): {"file": f, "position": p, "age_s": round(age, 3)}
            for sid, (f, p, age) in gate.followers().items()
        },
        "ack_gate_degraded": gate.degraded,
        "ack_gate_gave_up": gate.degraded_count,
    }
