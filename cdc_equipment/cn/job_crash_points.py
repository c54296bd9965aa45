"""Deliberate crashes at the steps of a cluster change's job, for the job chaos test.

`CDC_CN_JOB_CRASH_AT=<kind>:<point>` and `CDC_CN_JOB_CRASH_AFTER=<n>`: the process SIGKILLs
itself the n-th time (default 1st) a job of that kind reaches the point. A step's point is
*after the step was done and before the job log records it* (the taker must check it before
redoing it); `recorded` is right after the job's row was written, before any step. Unset: no
effect.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

# The steps of each kind of job, in order (`cdc_equipment/cn/jobs.py`); `shard`, `copy` and `move` are
# reached once per shard, copied table or moved partition.
STEPS = {
    "ddl": ("freeze", "shards", "catalogue", "record", "thaw"),
    "add-dn": ("freeze", "prepare", "storage_change", "catalogue", "thaw", "moves"),
    "move": ("freeze", "copy", "meta_change", "catalogue", "thaw", "drop_old"),
}
# Points inside a step (before the step is recorded): each shard's DDL, each moved partition.
INNER = {"ddl": ("shard",), "add-dn": ("move",), "move": ()}


def points(kind: str) -> tuple[str, ...]:
    """Every crash point of a job of `kind`, in the order a run reaches them."""
    steps = STEPS[kind]
    out = ["recorded"]
    for step in steps:
        out += [p for p in INNER[kind] if step in ("shards", "moves")]
        out.append(step)
    return tuple(out)


@dataclass(slots=True)
class JobCrashPoints:
    kind: str | None = None
    point: str | None = None
    after: int = 1
    _seen: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> JobCrashPoints:
        at = env.get("CDC_CN_JOB_CRASH_AT") or ""
        if not at:
            return cls()
        kind, _, point = at.partition(":")
        if kind not in STEPS or point not in points(kind):
            raise ValueError(
                f"CDC_CN_JOB_CRASH_AT={at!r}: not <kind>:<point> with kind one of "
                f"{', '.join(STEPS)} and point one of its `points(kind)`"
            )
        return cls(kind, point, int(env.get("CDC_CN_JOB_CRASH_AFTER", "1")))

    def reached(self, kind: str, point: str) -> None:
        if kind != self.kind or point != self.point:
            return
        self._seen += 1
        if self._seen >= self.after:
            os.kill(os.getpid(), signal.SIGKILL)
