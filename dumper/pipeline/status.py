"""What a writing process says in `cdc status` (its status file, its metrics): one shape for
the single stream's pipeline, a multi-stream merge and each stream's process
(`dumper.streams.stream_process`): what it wrote, how fast, where its binlog ends, how far
behind it is, and its DNs and problems (the pipeline's)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc.tso_layout import physical_ms

if TYPE_CHECKING:
    from dumper.pipeline.leader import Leader


@dataclass(slots=True)
class LeaderStats:
    transactions: int = 0
    events: int = 0
    bytes: int = 0
    last_tso: int = 0
    last_commit_at: float = 0.0
    restarts: int = 0  # pipeline restarts after a MergeSource process died
    spilled_bytes: int = 0  # of huge transactions streamed from MergeSource spill files
    started_at: float = field(default_factory=time.monotonic)

    def add(self, transactions: int, events: int, nbytes: int) -> None:
        """Transactions written (or sent to a stream), with their events and bytes."""
        self.transactions += transactions
        self.events += events
        self.bytes += nbytes


def write_status(stats: LeaderStats, end: tuple[str, int, int], lag_tso: int | None) -> dict:
    """The status of a writing process: `stats`, where its binlog ends (`end`: file, GTID
    number, position) and the lag behind `lag_tso` (None: not known). JSON-able."""
    now = time.time()
    elapsed = max(time.monotonic() - stats.started_at, 1e-6)
    file, gno, position = end
    return {
        "written_at": now,
        "last_tso": stats.last_tso,
        "lag_ms": int(now * 1000 - physical_ms(lag_tso)) if lag_tso is not None else None,
        "transactions": stats.transactions,
        "events": stats.events,
        "events_per_s": stats.events / elapsed,
        "restarts": stats.restarts,
        "bytes": stats.bytes,
        "spilled_bytes": stats.spilled_bytes,
        "last_commit_at": stats.last_commit_at,
        "file": file,
        "gno": gno,
        "position": position,
        "dns": [],
        "problems": [],
    }


def leader_status(leader: Leader) -> dict:
    """The pipeline's status (`cdc status`, and humans reading the status file): its DNs, and
    the lag behind the merge's low watermark."""
    low = leader.joint.merger.low_watermark() if leader.joint else None
    out = write_status(leader.stats, leader.output.end(), low[0] if low else None)
    out["low_watermark_tso"] = low[0] if low else None
    for dn, source in sorted(leader.sources.items()):
        status = source.status()
        silent = status.get("silent_s", 0.0)
        if source.error:
            out["problems"].append(f"{source.name}: {source.error}")
        elif silent > leader.config.pipeline.dn_idle_timeout_ms / 1000:
            out["problems"].append(
                f"{source.name} has sent nothing for {silent:.0f}s: the merge waits for it"
            )
        out["dns"].append({"dn": dn, "name": source.name, **status})
    return out
