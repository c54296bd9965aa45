"""Deliberate crashes at named steps of the commit protocol, for the kill tests (a `CrashHook` of
`cdc.cn_protocol.context`, passed to a writer: `ProtocolNode(crash_points=...)`).

`CDC_CN_CRASH_AT=<step>` and `CDC_CN_CRASH_AFTER=<n>`: the process SIGKILLs itself the n-th time
(default 1st) any transaction reaches <step>. Unset: no effect.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

# In protocol order (docs/cn.md, "Failure points covered by the kill test").
STEPS = (
    "after_first_prepare",  # one branch prepared, the others may not be
    "after_prepare",  # every branch prepared, no TSO yet
    "after_tso",  # TSO fetched, no commit record
    "after_primary_record",  # the decision is durable, secondaries have no record
    "after_records",  # every record written, no XA COMMIT
    "after_first_commit",  # one branch committed, the others still prepared
)


@dataclass(slots=True)
class CrashPoints:
    step: str | None = None
    after: int = 1
    _seen: int = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> CrashPoints:
        step = env.get("CDC_CN_CRASH_AT") or None
        if step is not None and step not in STEPS:
            raise ValueError(f"CDC_CN_CRASH_AT={step!r}: not one of {', '.join(STEPS)}")
        return cls(step, int(env.get("CDC_CN_CRASH_AFTER", "1")))

    def reached(self, step: str) -> None:
        if step != self.step:
            return
        self._seen += 1
        if self._seen >= self.after:
            os.kill(os.getpid(), signal.SIGKILL)
