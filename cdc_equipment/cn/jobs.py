"""Cluster changes as jobs (docs/cn.md, "Jobs"): recorded in the GMS (`job_log.py`) before
their first step, run step by step under the change lock, finished by a live CN when their
owner dies, rolled back when they cannot finish.

    runner = JobRunner(ctx, store, log)
    result = await runner.run("ddl", {"sql": ..., ...}, progress)

A job has a *locked* part (freeze ... thaw, under the change lock of `cluster_change.py`) and
possibly an *unlocked* one after the thaw (an added DN's partition moves, each a job of its
own; a moved partition's old copy dropped). Whoever takes the change lock first finishes the
locked part of every job whose owner is dead (so no change starts over another's half-done
freeze); a job in its unlocked part is finished by the member that notices it (`takeover`),
or by the command run again.

Each kind (`ddl.DdlJob`, `scale_out.AddDnJob`, `scale_out.MoveJob`) does each step checked
against what it finds, so a step done but not recorded is not done twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pymysql

from cdc.cn_protocol import schema
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.transaction import PrivateTransaction
from cdc_equipment.cn.cluster_change import (
    ClusterChange,
    Progress,
    cluster_change,
    reload_catalogue,
)
from cdc_equipment.cn.context import CnContext
from cdc_equipment.cn.job_crash_points import JobCrashPoints
from cdc_equipment.cn.job_log import DONE, ROLLED_BACK, RUNNING, Job, JobLog

log = logging.getLogger(__name__)

NO_OWNER = 0  # a job given up by a live CN: any member's takeover retries it
POISONED = 3  # takeovers failed in a row: `cdc cn recover` reports the job instead of retrying
# The `detail` key recording a decision to roll back, before the first undo: a taker that finds
# it goes on rolling back (a half-undone job resumed forward would leave the undo's leftovers,
# and a DROP half-undone cannot go either way).
ROLLING_BACK = "rolling_back"


class JobFailed(Exception):
    """The job cannot finish (a shard refuses the DDL, a DN is gone): roll it back."""


@dataclass(slots=True)
class JobRun:
    """One job being run by this process: what a kind's steps use."""

    ctx: CnContext
    store: CatalogueStore
    log: JobLog
    job: Job
    change: ClusterChange | None
    progress: Progress
    crash: JobCrashPoints
    runner: JobRunner

    async def freeze(self, keys) -> None:
        """A job's first step: freeze `keys` (redone by a taker: its own change must know them)
        and record it. A job whose roll-back had begun goes on rolling back from here."""
        await self.change.freeze(keys)
        if not self.job.done("freeze"):
            await self.reached("freeze")
        if ROLLING_BACK in self.job.detail:
            raise JobFailed(self.job.detail[ROLLING_BACK])

    def point(self, name: str) -> None:
        """A crash point inside a step (`job_crash_points.py`)."""
        self.crash.reached(self.job.kind, name)

    async def reached(self, step: str) -> None:
        self.crash.reached(self.job.kind, step)
        await self.log.reached(self.job, step)
        self.progress(f"job {self.job.id}: {step} done")

    async def retrying(self, what: str, op):
        """`op()` until it succeeds, a DN error other than "unreachable" (it refuses), or the
        change timeout (JobFailed: the DN is gone)."""
        deadline = time.monotonic() + self.ctx.config.cn.change_timeout_ms / 1000
        while True:
            try:
                return await op()
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError, OSError) as exc:
                if isinstance(exc, pymysql.err.MySQLError) and errno(exc) not in UNREACHABLE:
                    raise
                if time.monotonic() > deadline:
                    raise JobFailed(f"{what}: unreachable ({exc})") from None
                await asyncio.sleep(0.5)


UNREACHABLE = {2002, 2003, 2006, 2013, 2055, None}  # None: a client error without a code


def errno(exc: BaseException) -> int | None:
    return exc.args[0] if exc.args and isinstance(exc.args[0], int) else None


async def marker_once(
    run: JobRun, kind: str, write: Callable[[PrivateTransaction], Awaitable[int]]
) -> int:
    """Write a job's marker (a DDL record, a StorageChange or MetaChange) exactly once: its
    txn_id is recorded before it is written; a taker finds it committed (its commit record),
    or blocks it with a tombstone, as recovery does, before writing a new one."""
    ctx, job = run.ctx, run.job
    old = job.detail.get("marker_txn")
    if old:
        tso = await committed_tso(ctx, old)
        if tso is None:
            tombstone_tso = await ctx.tso.next()
            for dn in ctx.catalogue.dns:
                await ctx.pools.execute(dn, schema.INSERT_TOMBSTONE, (old, tombstone_tso))
            tso = await committed_tso(ctx, old)
        if tso is not None:
            return tso
    tx = PrivateTransaction(ctx, kind=kind)
    job.detail["marker_txn"] = tx.txn_id
    await run.log.save_detail(job)
    return await write(tx)


async def before_marker(run: JobRun, step: str) -> bool:
    """Is the job's marker (written by `step`) not committed? Until it is, nothing outside the
    job names what it made, and it can roll back."""
    txn = run.job.detail.get("marker_txn")
    return not run.job.done(step) and (not txn or await committed_tso(run.ctx, txn) is None)


async def committed_tso(ctx: CnContext, txn_id: int) -> int | None:
    """The commit TSO of `txn_id` if some DN holds its commit record (it is, or recovery will
    make it, committed), else None."""
    for dn in ctx.catalogue.dns:
        rows = await ctx.pools.execute(dn, schema.SELECT_RECORD, (txn_id,))
        if rows and not rows[0][2]:
            return int(rows[0][0])
    return None


class JobKind(Protocol):
    kind: str
    steps: tuple[str, ...]

    def what(self, spec: dict[str, Any]) -> str: ...

    async def plan(self, run: JobRun) -> dict[str, Any] | None:
        """Before the job exists (the lock held): the checks that refuse it at once (raising)
        and its target (`detail`); None if there is nothing to do."""

    async def locked(self, run: JobRun) -> None:
        """The steps up to and including the catalogue save (the runner thaws)."""

    async def can_roll_back(self, run: JobRun) -> bool: ...

    async def roll_back(self, run: JobRun) -> None:
        """Bring every shard back to the catalogue as it was before the job."""

    async def unlocked(self, run: JobRun) -> None:
        """The steps after the thaw (none for most kinds)."""

    def result(self, job: Job) -> Any:
        """What the command returns for a done job."""


@dataclass(slots=True)
class JobRunner:
    ctx: CnContext
    store: CatalogueStore
    log: JobLog
    kinds: dict[str, JobKind]
    crash: JobCrashPoints = field(default_factory=JobCrashPoints)
    _busy: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def me(self) -> int:
        return self.ctx.instance_id

    def _run(self, job: Job, change: ClusterChange | None, progress: Progress) -> JobRun:
        return JobRun(self.ctx, self.store, self.log, job, change, progress, self.crash, self)

    # -- a command ---------------------------------------------------------------------------
    async def run(self, kind: str, spec: dict[str, Any], progress: Progress | None = None) -> Any:
        """Run a change as a job (or adopt the unreported one of the same spec: a command run
        again after it was interrupted) and return its result; CatalogueError if it was rolled
        back, with the reason."""
        async with self._busy:  # one change at a time in this process (and no takeover)
            return await self._run_job(kind, spec, progress)

    async def run_unlocked_child(
        self, kind: str, spec: dict[str, Any], progress: Progress | None
    ) -> Any:
        """A job started by another job's unlocked part (an added DN's moves)."""
        return await self._run_job(kind, spec, progress)

    async def reload(self) -> None:
        await reload_catalogue(self.ctx, self.store)

    async def _run_job(self, kind: str, spec: dict[str, Any], progress: Progress | None) -> Any:
        k = self.kinds[kind]
        say = progress or log.info
        job = await self._adopt(kind, spec)
        taken: list[Job] = []
        async with self.locked(k.what(spec), progress, taken) as change:
            if job is None:
                run = self._run(Job(0, kind, k.what(spec), spec, list(k.steps), ""), change, say)
                detail = await k.plan(run)
                if detail is None:
                    return None
                job = await self.log.create(
                    kind, k.what(spec), spec, list(k.steps), detail, self.me
                )
                self.crash.reached(kind, "recorded")
                say(f"job {job.id}: {job.what}")
            else:
                job = await self.log.get(job.id)
                if job.state == RUNNING:
                    say(f"job {job.id}: resuming {job.what} after step {job.step or '(none)'}")
            if job.state == RUNNING and not job.done("thaw"):
                await self._locked_part(self._run(job, change, say))
        for other in taken:
            await self._unlocked_part(self._run(other, None, log.info))
        job = await self.log.get(job.id)  # one of `taken`, maybe
        if job.state == RUNNING:
            run = self._run(job, None, say)
            await self._unlocked_part(run)
            job = run.job  # (as `_unlocked_part` read it again, and finished it)
        await self.log.mark_reported(job)
        if job.state == ROLLED_BACK:
            raise CatalogueError(f"job {job.id} ({job.what}) rolled back: {job.reason}")
        return k.result(job)

    async def _adopt(self, kind: str, spec: dict[str, Any]) -> Job | None:
        """The unreported job of this spec, owned by this process from here on if it runs;
        waits while its owner is a live CN (its lease has not run out yet, or it took it over)."""
        deadline = time.monotonic() + self.ctx.config.cn.change_timeout_ms / 1000
        while True:
            job = await self.log.unreported(kind, spec)
            if job is None or job.state != RUNNING or job.owner == self.me:
                return job
            if await self.log.take(job, self.me):
                return job
            if time.monotonic() > deadline:
                raise CatalogueError(
                    f"job {job.id} ({job.what}) is run by CN instance {job.owner}, a live CN: "
                    "`cdc cn jobs` shows when it ends"
                )
            await asyncio.sleep(self.ctx.membership.interval_s * 5)

    # -- takeover ----------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def locked(
        self, what: str, progress: Progress | None, taken: list[Job]
    ) -> AsyncIterator[ClusterChange]:
        """The change lock, with the locked part of every dead owner's job finished first (so
        no change starts over a half-done freeze); the jobs still to finish after their thaw
        are taken and appended to `taken`."""
        async with cluster_change(self.ctx, self.store, what, progress) as change:
            for job in await self.log.orphans():
                if not await self.log.take(job, self.me):
                    continue
                change.progress(f"taking over job {job.id} ({job.what}) after {job.step!r}")
                if not job.done("thaw"):
                    await self._locked_part(self._run(job, change, change.progress))
                if job.state == RUNNING:
                    taken.append(job)
            yield change

    async def takeover(self) -> None:
        """A member saw a dead CN's change or job: finish it (or roll it back). Never raises:
        it runs in the member's background, and the next poll tries again."""
        if self._busy.locked():
            return  # this process runs a change: it finishes dead CNs' jobs as it takes the lock
        try:
            async with self._busy:
                await self._takeover()
        except Exception:  # noqa: BLE001 - logged; the next poll retries
            log.exception("CN instance %s: taking over a job failed", self.me)

    async def finish_dead_owners_jobs(self) -> tuple[int, list[Job]]:
        """Take over every running job whose owner is dead, waiting out the lease of an owner
        that has just died (`cdc cn recover`: the next `cdc cn` command finishes them). Returns
        the number of jobs still running, run by live CNs, and the dead owners' jobs whose
        takeover here failed and has failed `POISONED` times in a row: retrying them is
        pointless until their cause is fixed (or they are rolled back: `roll_back_job`)."""
        deadline = time.monotonic() + 2 * self.ctx.config.cn.lease_ms / 1000
        tried: set[int] = set()
        while True:
            running = await self.log.running()
            orphans = await self.log.orphans()
            stuck = [j for j in orphans if j.id in tried and j.failures >= POISONED]
            if not running or stuck:
                return len(running) - len(orphans), stuck
            if orphans:
                tried |= {j.id for j in orphans}
                await self.takeover()
            elif time.monotonic() > deadline:
                return len(running), []
            await asyncio.sleep(self.ctx.membership.interval_s * 2)

    async def roll_back_job(self, job_id: int, progress: Progress | None = None) -> Job:
        """The operator's way out of a job whose takeover fails every time (`cdc cn jobs
        --roll-back ID`): a running job whose owner is no live CN, of a kind that can still roll
        it back (no marker written, no shard's DROP run), is rolled back now under the change
        lock. The decision is recorded first (`ROLLING_BACK`): killed half-way, it goes on."""
        say = progress or log.info
        async with self._busy:
            job = await self.log.get(job_id)
            if job.state != RUNNING:
                raise CatalogueError(f"job {job.id} ({job.what}) is {job.state}, not running")
            run = self._run(job, None, say)
            if ROLLING_BACK not in job.detail and not await self.kinds[job.kind].can_roll_back(run):
                raise CatalogueError(
                    f"job {job.id} ({job.what}) is past the point of rolling back (step "
                    f"{job.step or '(none)'}): it can only be finished"
                )
            if not await self.log.take(job, self.me):
                raise CatalogueError(
                    f"job {job.id} ({job.what}) is run by CN instance {job.owner}, a live CN"
                )
            job.detail.setdefault(ROLLING_BACK, "rolled back by the operator (`cdc cn jobs`)")
            await self.log.save_detail(job)
            async with self.locked(f"rolling back job {job.id}", say, []) as change:
                await self._locked_part(self._run(job, change, say))
            return await self.log.get(job.id)

    async def _takeover(self) -> None:
        if not (await self.ctx.membership.try_lock("taking over a dead CN's job"))[0]:
            return  # a live CN holds the lock: it finishes the locked parts itself
        taken: list[Job] = []
        async with self.locked("taking over a dead CN's job", log.warning, taken):
            pass
        for job in taken:
            await self._unlocked_part(self._run(job, None, log.warning))

    # -- the parts -----------------------------------------------------------------------------
    async def _locked_part(self, run: JobRun) -> None:
        """The steps up to the thaw. A JobFailed rolls the job back (when its kind still can);
        any other failure, the thaw's and the roll-back's too, leaves it running and frozen,
        given up to whichever CN retries it (never owned by a live CN that no longer runs it)."""
        k, job, change = self.kinds[run.job.kind], run.job, run.change
        assert change is not None
        try:
            await k.locked(run)
        except JobFailed as exc:
            if ROLLING_BACK not in job.detail and not await k.can_roll_back(run):
                await self._stall(change, job, f"{exc} (past the point of rolling back; retried)")
                raise CatalogueError(f"job {job.id} ({job.what}): {exc}; retried") from None
            await self._guarded(change, job, "rolling back: ", self._roll_back(run, exc))
            return
        except Exception as exc:
            await self._stall(change, job, f"{type(exc).__name__}: {exc}")
            raise
        await self._guarded(change, job, "", self._thaw(run))

    async def _roll_back(self, run: JobRun, exc: JobFailed) -> None:
        job, change = run.job, run.change
        if ROLLING_BACK not in job.detail:
            job.detail[ROLLING_BACK] = str(exc)  # before the first undo (see ROLLING_BACK)
            await self.log.save_detail(job)
        run.progress(f"job {job.id}: rolling back: {exc}")
        await self.kinds[job.kind].roll_back(run)
        await change.thaw()
        await self.log.finish(job, ROLLED_BACK, reason=job.detail[ROLLING_BACK])

    async def _thaw(self, run: JobRun) -> None:
        job = run.job
        await run.change.thaw()
        await run.reached("thaw")
        if job.steps[-1] == "thaw":
            await self.log.finish(job, DONE, result=job.detail.get("result", {}))

    async def _guarded(
        self, change: ClusterChange, job: Job, what: str, step: Awaitable[None]
    ) -> None:
        try:
            await step
        except Exception as exc:
            await self._stall(change, job, f"{what}{type(exc).__name__}: {exc}")
            raise

    async def _stall(self, change: ClusterChange, job: Job, why: str) -> None:
        change.keep_frozen = True  # the next taker thaws (after finishing or rolling back)
        await self._give_up(job, why)

    async def _unlocked_part(self, run: JobRun) -> None:
        k = self.kinds[run.job.kind]
        # As it is now: a job taken before another's unlocked part may have been finished by it
        # (an added DN's move, adopted by the DN's job).
        run.job = job = await self.log.get(run.job.id)
        if job.state != RUNNING:
            return
        try:
            await k.unlocked(run)
        except Exception as exc:
            await self._give_up(job, f"{type(exc).__name__}: {exc}")
            raise
        await self.log.finish(job, DONE, result=job.detail.get("result", {}))

    async def _give_up(self, job: Job, why: str) -> None:
        """Leave a job that failed for a reason that may pass (a GMS or DN error) to any CN's
        takeover: no owner, the reason kept for `cdc cn jobs`."""
        log.warning("job %s (%s) not finished: %s; a live CN retries it", job.id, job.what, why)
        with contextlib.suppress(Exception):
            await self.log.give_up(job, NO_OWNER, why)
