"""A leader's part (docs/dumper.md, "High availability"): one term, from the lease won to the
step-down (`Leadership.lead`). Before the term's pipeline writes, the copy is made ready
(aligned with the terms before it; with several streams, each stream's tail fetched from the
follower ahead in it: `stream_tail`) and the term records where it begins. Meanwhile the lease
is renewed; the fence (`HaState.fence`) refuses every write once it ran out, and the term ends
at once then, whatever its tasks wait for (`STEP_DOWN_GRACE_S`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from cdc.config import Config, NodeConfig
from cdc.tasks import cancel_and_wait
from dumper.ha.copies import CopyTarget, end_of, save_state_term
from dumper.ha.deps import LeaderBuilder, LeaseStore
from dumper.ha.following import CopyServers
from dumper.ha.peers import peer_dump_settings
from dumper.ha.served_bound import BoundRecorder
from dumper.ha.state import HaState
from dumper.ha.stream_tail import catch_up
from dumper.ha.takeover import TakeoverTimeline
from dumper.pipeline import Leader, LeaderError, Term
from dumper.server import AckGate
from topology import TermStart, gms

log = logging.getLogger(__name__)

# How long a term's tasks get to end after the term; what still runs then is left behind (it
# can write nothing: the fence refuses every write once the node stepped down).
STEP_DOWN_GRACE_S = 2.0


class Leadership:
    """Leads the terms this process wins: `leaders` builds each term's pipeline, `on_lead`
    runs beside it (the CN heartbeat), `acks` is the gate of the followers' acknowledgements
    (one stream), `copy_servers` the servers of a follower's stream copies (stopped while it
    leads: its stream processes take their ports)."""

    def __init__(
        self,
        config: Config,
        state: HaState,
        store: LeaseStore,
        leaders: LeaderBuilder,
        copies: list[CopyTarget],
        nodes: dict[int, NodeConfig],
        align: Callable[[int], Awaitable[bool]],
        *,
        on_lead: Callable[[], Awaitable[None]] | None = None,
        copy_servers: CopyServers | None = None,
        acks: AckGate | None = None,
        bounds: BoundRecorder | None = None,
    ):
        self.config = config
        self.state = state
        self.store = store
        self._leaders = leaders
        self.copies = copies
        self.nodes = nodes  # the DNs every term's pipeline merges (StorageChange adds some)
        self._align = align
        self._on_lead = on_lead
        self._copy_servers = copy_servers
        self.acks = acks
        self.bounds = bounds  # records how far the gate may serve while degraded

    async def lead(self, term: int, timeline: TakeoverTimeline | None = None) -> None:
        """Lead term `term` (just won) until the term ends: only ends by raising."""
        state = self.state
        state.granted()  # (just after the GMS granted the lease)
        if self._copy_servers is not None:
            await self._copy_servers.stop()  # this process's stream processes take the ports
        state.lead(term)
        if self.acks is not None:
            self.acks.reset()
        # Renewed from now: what comes before the pipeline runs (fetching stream tails,
        # recovering the copy) may take a good part of the lease.
        tasks = [asyncio.create_task(self._renew_loop(term), name="lease")]
        try:
            leader, where = await self._begin_term(term, timeline, tasks[0])
            state.leader = leader
            log.info(
                "dumper %d: leader of term %d, writing from %s", self.config.dumper.id, term, where
            )
            tasks.append(asyncio.create_task(leader.run(), name="leader"))
            if self._on_lead is not None:
                tasks.append(asyncio.create_task(self._on_lead(), name="on-lead"))
            if self.bounds is not None:
                run = self.bounds.run(term, lambda: _writer_end(leader))
                tasks.append(asyncio.create_task(run, name="served-bound"))
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                t.result()
            raise LeaderError(f"{next(iter(done)).get_name()} stopped unexpectedly")
        finally:
            if state.lease_left() <= 0:
                # Fenced: stop at once, not once the term's tasks have ended (one may wait on
                # a GMS that no longer answers, seen for 23 s).
                state.step_down(term, fenced=True)
            await cancel_and_wait(tasks, grace=STEP_DOWN_GRACE_S)
            state.step_down(term, fenced=False)
            if state.lease_left() > 0:
                with contextlib.suppress(Exception):  # (TimeoutError included)
                    async with asyncio.timeout(2):  # not wait_for (ARCHITECTURE §8)
                        await self.store.release(self.config.dumper.id, term)

    async def _begin_term(
        self, term: int, timeline: TakeoverTimeline | None, renew: asyncio.Task
    ) -> tuple[Leader, str]:
        """The copy made ready for term `term`, and its pipeline; where it writes from."""
        # Terms between the one this copy came from and ours may have cut the stream below
        # our end (a term that never recorded its start wrote nothing).
        await self._align(term - 1)
        if timeline is not None:
            timeline.mark("copy aligned with the terms")
        if self.copies[0].stream is not None:
            await self.catch_up_streams()
            if renew.done():
                renew.result()  # (fenced meanwhile: raises)
            if timeline is not None:
                timeline.mark("stream tails fetched")
        leader = self._leaders.build(
            self.nodes, Term(term, self.state.fence, timeline, sure_until=self.state.sure_until)
        )
        if timeline is not None:
            timeline.mark("copy recovered")
        if self.copies[0].stream is not None:
            # Each stream's writer recovers its copy in its own process, which records where
            # the term began in its stream (`dumper.streams.stream_process`).
            return leader, f"the ends of its {len(self.copies)} stream copies"
        rec = leader.writer.recovery
        start = TermStart(
            term,
            self.config.dumper.id,
            leader.writer.file,
            4 if rec.started_new_file else leader.writer.position,
        )
        await self.store.record_term(start)
        save_state_term(self.copies[0].dir, term)
        if timeline is not None:
            timeline.mark("term recorded")
        return leader, f"{start.file}:{start.position}"

    async def catch_up_streams(self) -> None:
        """Several streams: each copy brought up to the furthest live follower's in its stream
        before the term begins there (`dumper.ha.stream_tail`: the election cannot pick a
        member furthest in every stream, and the old leader served each stream's consumers as
        far as any follower acknowledged). Each dump is bounded by `lease_ms`; the lease is
        renewed meanwhile (`lead`)."""
        d = self.config.dumper
        try:
            members = await self.store.members()
        except gms.UNREACHABLE as exc:
            log.warning("dumper %d: members not read, no stream tail fetched: %s", d.id, exc)
            return
        await catch_up(
            d,
            self.copies,
            members,
            lambda copy: end_of(copy, d.binlog_base),
            lambda address, what: peer_dump_settings(d, address, what, non_blocking=True),
            timeout_s=max(1.0, d.lease_ms / 1000),
        )

    async def _renew_loop(self, term: int) -> None:
        d, state = self.config.dumper, self.state
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
                left = state.valid_until - now
                await asyncio.sleep(max(0.0, min(sent + d.lease_renew_ms / 1000 - now, left)))
            first = False
            sent = time.monotonic()
            bound = max(0.1, state.valid_until - sent)
            try:
                # Not wait_for (ARCHITECTURE §8): it could swallow the cancel of a stop.
                async with asyncio.timeout(bound):
                    ok = await self.store.renew(d.id, term, d.lease_ms)
            except (Exception, TimeoutError) as exc:  # GMS unreachable: keep trying until fenced
                # (a TimeoutError's text is empty: the log said "lease renewal failed: ")
                why = str(exc) or f"{type(exc).__name__}: no answer within {bound:.2f} s"
                log.warning("dumper %d: lease renewal failed: %s", d.id, why)
                ok = None
            if ok:
                state.renewed(sent)
            elif ok is False:
                state.refused()
            state.fence()


def _writer_end(leader: Leader) -> tuple[str, int]:
    """The end of the last whole transaction in the writer's file (what is visible)."""
    writer = leader.writer
    end = writer.visible_end(writer.file)
    return writer.file, writer.position if end is None else end
