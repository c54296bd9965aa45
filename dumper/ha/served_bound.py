"""A degraded ack gate's bound (docs/dumper.md, "A degraded gate's bound"): what closes the fork
after two failures. A leader whose gate gave up (no follower acknowledged within `ack_wait_ms`)
serves its consumers bytes no follower holds; if it then dies and a member with a shorter copy
takes the next term, those consumers read a history the cluster no longer has.

So the leader's degraded gate serves no further than a bound the leader recorded in the GMS
first, in its term's row (`BoundRecorder`: the writer's end whenever a held dump asks for more,
so one GMS write per step, never one per batch; the write is conditional on the lease), and a
candidate whose copy ends before the newest term's bound does not take over (`TakeoverHold`):
it waits, saying so once per term, for a member whose copy reaches it (the old leader, back),
unless `[dumper] degraded_takeover_after_s` trades that for availability. A gate that never
degraded records nothing: takeovers after a single failure are as fast as before.

Several streams (docs/streams.md, "HA followers"): each leading stream process holds the gate
of its port and runs its own `BoundRecorder` (dumper/ha/stream_term.py), which writes the
GMS itself, in its stream's row of the term (`binlog_dumper_stream_term`), as it records the
term's start there; a candidate waits if its copy of any stream ends before that stream's
standing bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from binlog_writer import file_number
from cdc.config import DumperConfig
from cdc.tasks import wait_event
from dumper.ha.copies import CopyTarget, end_of, read_state_term
from dumper.ha.deps import LeaseStore
from dumper.ha.election import order
from dumper.server import AckGate
from topology import ServedBound, TermStart

log = logging.getLogger(__name__)

RETRY_S = 0.5  # a held dump's wish looked at again (a failed GMS write, a missed report)


class BoundRecorder:
    """The served bound of the term this process leads, as recorded in the GMS: what its gate
    may serve while degraded (`current`, read by the gate or published to the server
    process). (0, 0) while nothing is recorded (or not leading): acknowledged data only."""

    def __init__(
        self, d: DumperConfig, store: LeaseStore, gate: AckGate, stream: int | None = None
    ):
        """`stream`: the stream whose gate this is (a leading stream process's: the bound
        goes in its stream's row of the term); None: the single stream."""
        self._d = d
        self.store = store
        self.gate = gate
        self.stream = stream
        self.term = 0
        self.at: tuple[int, int] = (0, 0)  # (file number, position) recorded for `term`
        self.recorded: tuple[str, int] | None = None  # the same as file:position
        self.records = 0  # GMS writes this process made (status, tests)

    def current(self) -> tuple[int, int]:
        return self.at

    async def run(self, term: int, writer_end: Callable[[], tuple[str, int] | None]) -> None:
        """While leading term `term`: whenever a degraded dump waits at the bound, record the
        writer's end (everything written so far) as the next one."""
        self.term, self.at, self.recorded = term, (0, 0), None
        gate, warned = self.gate, False
        try:
            while True:
                await wait_event(gate.asked, RETRY_S)
                gate.asked.clear()
                if not gate.degraded or gate.wants < self.at:
                    continue
                end = writer_end()
                if end is None:
                    continue
                target = (file_number(end[0]), end[1])
                if target <= self.at:
                    continue
                try:
                    ok = await self.store.record_served(term, self._d.id, *end, self.stream)
                except Exception as exc:  # (the GMS away: the gate stays where it is)
                    ok = False
                    if not warned:
                        log.warning(
                            "dumper %d%s: served bound of term %d not recorded (%s): the "
                            "degraded gate serves no further than %s",
                            self._d.id,
                            _of(self.stream),
                            term,
                            exc,
                            self.at,
                        )
                        warned = True
                if ok:
                    if self.at == (0, 0):
                        log.warning(
                            "dumper %d%s: term %d serves past its followers' copies: recorded "
                            "in the GMS how far (%s:%d, then further as it serves); a member "
                            "whose copy ends before that will not take over",
                            self._d.id,
                            _of(self.stream),
                            term,
                            *end,
                        )
                    self.at, self.recorded, warned = target, end, False
                    self.records += 1
                    gate.bound_changed()
        finally:
            self.at, self.recorded = (0, 0), None


@dataclass(frozen=True, slots=True)
class Behind:
    """A stream where the candidate's copy ends before the standing bound."""

    bound: ServedBound
    end: tuple[str, int]  # the copy's end (cut back to the newest term's start)


class TakeoverHold:
    """Whether a candidate (the election's winner) may take over, given the standing served
    bound of each stream it copies: only if its copy of every stream reaches that stream's
    bound, or once `degraded_takeover_after_s` passed."""

    def __init__(
        self,
        d: DumperConfig,
        store: LeaseStore,
        copies: Sequence[CopyTarget],
        align: Callable[[int], Awaitable[bool]],
    ):
        """`copies`: this process's copies (the single global binlog, or one per stream);
        `align`: cut the copies back to the starts of the terms up to one."""
        self._d = d
        self.store = store
        self._copies = copies
        self._align = align
        self.waiting: dict | None = None  # what it waits for (`cdc status`), None: nothing
        self._behind_since: dict[int, float] = {}  # term → (monotonic) first seen behind it
        self._said: set[tuple[int, str]] = set()  # (term, what) logged once

    def _end(self, copy: CopyTarget) -> tuple[str, int]:
        return end_of(copy, self._d.binlog_base)

    async def allows(self) -> bool:
        behind = []
        for copy in self._copies:
            if (found := await self._behind_in(copy)) is not None:
                behind.append(found)
        if not behind:
            self.waiting = None
            return True
        return self._behind(behind)

    async def _behind_in(self, copy: CopyTarget) -> Behind | None:
        """Where `copy` ends before its stream's standing bound (None: it reaches it)."""
        records = await self.store.served_bounds(copy.stream)
        bound = standing_bound(records)
        if bound is None:
            return None
        end, newest = self._end(copy), records[-1][0].term
        if order(*end) >= order(bound.file, bound.position) and read_state_term(copy.dir) < newest:
            # Bytes of an older term past a newer term's start are not the history that goes
            # on: compare what is left once the copy is cut back to it (as a takeover would).
            await self._align(newest)
            end = self._end(copy)
        if order(*end) >= order(bound.file, bound.position):
            return None
        return Behind(bound, end)

    def _behind(self, behind: list[Behind]) -> bool:
        d, now = self._d, time.monotonic()
        term = max(b.bound.term for b in behind)  # (the wait is counted from the newest)
        since = self._behind_since.setdefault(term, now)
        first = behind[0]
        bound, end = first.bound, first.end
        if d.degraded_takeover_after_s > 0 and now - since >= d.degraded_takeover_after_s:
            self._once(
                term,
                "override",
                f"dumper {d.id}: taking over although "
                + "; ".join(_served(b) for b in behind)
                + f" (degraded_takeover_after_s = {d.degraded_takeover_after_s:g}): consumers "
                "that read past this copy's end hold a history the cluster forks from",
            )
            self.waiting = None
            return True
        self.waiting = {
            "term": bound.term,
            "served_file": bound.file,
            "served_position": bound.position,
            "holder": bound.dumper_id,
            "copy_file": end[0],
            "copy_position": end[1],
            "since_s": round(now - since, 1),
        }
        if bound.stream is not None:
            self.waiting["stream"] = bound.stream
            self.waiting["streams"] = [b.bound.stream for b in behind]
        holders = sorted({b.bound.dumper_id for b in behind})
        self._once(
            term,
            "wait",
            f"dumper {d.id}: not taking over: "
            + "; ".join(_served(b, "while no follower held it") for b in behind)
            + f"; waiting for dumper {' or '.join(map(str, holders))} (or a copy that reaches "
            "that far) to come back"
            + (
                f", at most {d.degraded_takeover_after_s:g} s"
                if d.degraded_takeover_after_s > 0
                else " ([dumper] degraded_takeover_after_s trades this for availability)"
            ),
        )
        return False

    def _once(self, term: int, what: str, message: str) -> None:
        if (term, what) not in self._said:
            self._said.add((term, what))
            log.error("%s", message)


def _served(b: Behind, why: str = "") -> str:
    """What a stream's bound says: who served how far, and where this copy ends."""
    bound = b.bound
    where = f"{bound.file}:{bound.position}"
    stream = f"stream {bound.stream}: " if bound.stream is not None else ""
    return (
        f"{stream}term {bound.term}'s leader (dumper {bound.dumper_id}) served consumers up "
        f"to {where}{' ' + why if why else ''}, and this copy ends at {b.end[0]}:{b.end[1]}"
    )


def _of(stream: int | None) -> str:
    return f" stream {stream}" if stream is not None else ""


def standing_bound(records: list[tuple[TermStart, ServedBound | None]]) -> ServedBound | None:
    """The served bound every candidate must reach, of `records` (each term's start and bound,
    oldest first): the furthest bound of any term, unless a later term began before it (its
    consumers lost that history already: a takeover forced by `degraded_takeover_after_s`).
    Not just the newest term's: the old leader back from a degraded term starts the next one
    at its end, and dies again before a consumer of it asked for a bound of its own."""
    standing: ServedBound | None = None
    for start, bound in records:
        if standing is not None and order(start.file, start.position) < order(
            standing.file, standing.position
        ):
            standing = None
        if bound is not None and (
            standing is None
            or order(bound.file, bound.position) > order(standing.file, standing.position)
        ):
            standing = bound
    return standing
