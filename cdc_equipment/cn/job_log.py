"""The job log in the GMS (`cn_job`): every cluster change (a logical DDL, an added DN, a
partition move) is a row written before its first step, with the steps it will take, the last
step done and what a taker needs to redo the next one checked (`detail`). A job whose owner
dies is finished by a live CN (`cdc_equipment/cn/jobs.py`); one that cannot finish is rolled back, and says why.

States: `running`, `done`, `rolled back`. `reported` is set once the command that asked for the
job has told its user the outcome: a command run again adopts the unreported job of the same
kind and spec (running, or ended within 10 minutes) instead of starting a second one.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.gms import Statements

RUNNING, DONE, ROLLED_BACK = "running", "done", "rolled back"
# `detail`'s count of the attempts given up since the job last reached a step: a job whose
# takeover fails every time (a bug, a shard that refuses past the point of rolling back) blocks
# every later change, and says so (`render`, `cdc cn recover`).
FAILURES = "failures"
# A command run again adopts a job that another CN finished for it this recently.
ADOPT_WITHIN_S = 600

_COLUMNS = (
    "id, kind, what, spec, steps, step, detail, state, owner, reason, result, reported, "
    "created_at, updated_at"
)


@dataclass(slots=True)
class Job:
    id: int
    kind: str  # ddl | add-dn | move
    what: str
    spec: dict[str, Any]  # what was asked: enough for any CN to run it
    steps: list[str]
    step: str  # the last step done ("" before the first)
    detail: dict[str, Any] = field(default_factory=dict)  # what redoing the next step checks
    state: str = RUNNING
    owner: int = 0
    reason: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    reported: bool = False
    created_at: str = ""
    updated_at: str = ""

    @property
    def failures(self) -> int:
        """Attempts given up in a row (no step reached since)."""
        return int(self.detail.get(FAILURES, 0))

    def done(self, step: str) -> bool:
        """Has `step` been done (recorded)?"""
        return bool(self.step) and self.steps.index(self.step) >= self.steps.index(step)

    @property
    def next_step(self) -> str:
        return self.steps[self.steps.index(self.step) + 1] if self.step else self.steps[0]


def _job(row) -> Job:
    return Job(
        int(row[0]),
        row[1],
        row[2],
        json.loads(row[3]),
        json.loads(row[4]),
        row[5],
        json.loads(row[6]),
        row[7],
        int(row[8]),
        row[9],
        json.loads(row[10]),
        bool(row[11]),
        str(row[12]),
        str(row[13]),
    )


def spec_text(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True)


class JobLog:
    """The `cn_job` rows. Every update names the owner: a CN that lost its job to a taker (its
    lease ran out while it was paused) cannot record a step over the taker's. Run on the CN's
    membership connection (`run`): a job records each step, a connection per call would cost."""

    def __init__(self, run: Callable[[Statements], Awaitable[list[list]]], catalogue_db: str):
        self._run = run
        self.db = catalogue_db

    async def create(
        self,
        kind: str,
        what: str,
        spec: dict[str, Any],
        steps: list[str],
        detail: dict[str, Any],
        owner: int,
    ) -> Job:
        """The job's row, with its plan (`detail`) in the same statement: a process killed
        right after the INSERT leaves a job any taker can run, never one without a target."""
        _, ((job_id,),) = await self._run(
            [
                (
                    f"INSERT INTO `{self.db}`.cn_job (kind, what, spec, steps, step, detail, "
                    "state, owner, reason, result, created_at, updated_at) VALUES (%s, %s, %s, "
                    "%s, '', %s, %s, %s, '', '{}', NOW(6), NOW(6))",
                    (
                        kind,
                        what[:255],
                        spec_text(spec),
                        json.dumps(steps),
                        json.dumps(detail),
                        RUNNING,
                        owner,
                    ),
                ),
                ("SELECT LAST_INSERT_ID()", None),
            ]
        )
        return await self.get(int(job_id))

    async def get(self, job_id: int) -> Job:
        (rows,) = await self._run(
            [(f"SELECT {_COLUMNS} FROM `{self.db}`.cn_job WHERE id = %s", (job_id,))]
        )
        return _job(rows[0])

    async def _update(self, job: Job, assignments: str, params: tuple) -> None:
        (n,) = (
            await self._run(
                [
                    (
                        f"UPDATE `{self.db}`.cn_job SET {assignments}, updated_at = NOW(6) "
                        "WHERE id = %s AND owner = %s",
                        (*params, job.id, job.owner),
                    )
                ]
            )
        )[0]
        if not n:
            raise CatalogueError(
                f"job {job.id} ({job.what}) was taken over by another CN (this one's lease ran "
                "out); it finishes it"
            )

    async def reached(self, job: Job, step: str) -> None:
        """Record `step` as done, with the job's `detail` as it is now."""
        job.detail.pop(FAILURES, None)  # it moves again
        await self._update(job, "step = %s, detail = %s", (step, json.dumps(job.detail)))
        job.step = step

    async def save_detail(self, job: Job) -> None:
        await self._update(job, "detail = %s", (json.dumps(job.detail),))

    async def finish(
        self, job: Job, state: str, *, reason: str = "", result: dict | None = None
    ) -> None:
        job.state, job.reason, job.result = state, reason, result or {}
        await self._update(
            job,
            "state = %s, reason = %s, result = %s",
            (state, reason, json.dumps(job.result)),
        )

    async def take(self, job: Job, owner: int) -> bool:
        """Become the owner of a running job whose owner is not a live CN (False: another
        CN took it first, or it ended)."""
        (n,) = (
            await self._run(
                [
                    (
                        f"UPDATE `{self.db}`.cn_job SET owner = %s, updated_at = NOW(6) WHERE "
                        "id = %s AND owner = %s AND state = %s AND (owner = %s OR owner NOT IN "
                        f"(SELECT instance_id FROM `{self.db}`.cn_member WHERE lease_until > "
                        "NOW(6)))",
                        (owner, job.id, job.owner, RUNNING, owner),
                    )
                ]
            )
        )[0]
        if n:
            job.owner = owner
        return bool(n)

    async def give_up(self, job: Job, owner: int, reason: str) -> None:
        """Leave a running job to whoever takes it next (`owner` no live CN), saying why and
        counting the attempt (`FAILURES`)."""
        job.detail[FAILURES] = job.failures + 1
        await self._update(
            job, "owner = %s, reason = %s, detail = %s", (owner, reason, json.dumps(job.detail))
        )
        job.owner, job.reason = owner, reason

    async def mark_reported(self, job: Job) -> None:
        await self._run([(f"UPDATE `{self.db}`.cn_job SET reported = 1 WHERE id = %s", (job.id,))])

    async def orphans(self) -> list[Job]:
        """Running jobs whose owner is not a live CN, oldest first."""
        (rows,) = await self._run(
            [
                (
                    f"SELECT {_COLUMNS} FROM `{self.db}`.cn_job WHERE state = %s AND owner NOT "
                    f"IN (SELECT instance_id FROM `{self.db}`.cn_member WHERE lease_until > "
                    "NOW(6)) ORDER BY id",
                    (RUNNING,),
                )
            ]
        )
        return [_job(r) for r in rows]

    async def running(self) -> list[Job]:
        (rows,) = await self._run(
            [(f"SELECT {_COLUMNS} FROM `{self.db}`.cn_job WHERE state = %s", (RUNNING,))]
        )
        return [_job(r) for r in rows]

    async def unreported(self, kind: str, spec: dict[str, Any]) -> Job | None:
        """The job of this kind and spec whose outcome no command has reported yet: running,
        or ended within `ADOPT_WITHIN_S` (the same statement run again later is a new job)."""
        (rows,) = await self._run(
            [
                (
                    f"SELECT {_COLUMNS} FROM `{self.db}`.cn_job WHERE kind = %s AND spec = %s "
                    "AND reported = 0 AND (state = %s OR updated_at > NOW(6) - INTERVAL %s "
                    "SECOND) ORDER BY id DESC LIMIT 1",
                    (kind, spec_text(spec), RUNNING, ADOPT_WITHIN_S),
                )
            ]
        )
        return _job(rows[0]) if rows else None

    async def recent(self, limit: int = 50) -> list[Job]:
        (rows,) = await self._run(
            [
                (
                    f"SELECT {_COLUMNS} FROM `{self.db}`.cn_job ORDER BY id DESC LIMIT %s",
                    (limit,),
                )
            ]
        )
        return [_job(r) for r in rows]

    async def live_members(self) -> set[int]:
        (rows,) = await self._run(
            [
                (
                    f"SELECT instance_id FROM `{self.db}`.cn_member WHERE lease_until > NOW(6)",
                    None,
                )
            ]
        )
        return {int(r[0]) for r in rows}


def render(jobs: list[Job], live: set[int]) -> str:
    """`cdc cn jobs`: one line per job, newest first, with the reason of a failure below it."""
    if not jobs:
        return "no jobs"
    lines = [
        f"{'id':>5}  {'state':<11}  {'step reached':<24}  {'owner':<14}  {'updated':<19}  what"
    ]
    for j in jobs:
        reached = f"{j.step or '-'} ({j.steps.index(j.step) + 1 if j.step else 0}/{len(j.steps)})"
        if j.state != RUNNING:
            owner = f"{j.owner}" if j.owner else "-"
        else:
            owner = f"{j.owner} ({'live' if j.owner in live else 'dead'})" if j.owner else "none"
        lines.append(
            f"{j.id:>5}  {j.state:<11}  {reached:<24}  {owner:<14}  {j.updated_at[:19]:<19}  "
            f"{j.what}"
        )
        if j.reason:
            lines.append(f"{'':>7}reason: {j.reason}")
        if j.state == RUNNING and j.failures:
            lines.append(
                f"{'':>7}{j.failures} attempt(s) in a row failed (no step reached since): "
                "every later change waits for this job"
            )
    return "\n".join(lines)
