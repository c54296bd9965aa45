"""The merge process of a multi-stream global binlog (`[dumper] streams = N`, docs/streams.md):
MergeSources → MergeJoint → the stream processes (a `Leader` whose output is a
`StreamOutput`). It serves no binlog itself: its port answers `SHOW BINARY STREAMS`, the
streams' ports serve them."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from cdc.config import Config
from cdc.pauses import Pauses
from cdc.streams import stream_port
from dumper.heartbeats import heartbeats
from dumper.pipeline import Leader, leader_status
from dumper.role import Role
from dumper.streams.stream_output import stream_leader

if TYPE_CHECKING:
    from merge_source import ForkServer

log = logging.getLogger(__name__)


def streams_status(config: Config, state_dir: Path) -> list[dict]:
    """Each stream's status as its process last wrote it (its `status.json`)."""
    out = []
    for i in range(config.dumper.streams):
        entry = {"stream": i, "port": stream_port(config.dumper, i)}
        try:
            entry.update(json.loads((state_dir / f"stream{i}" / "status.json").read_text()))
        except (OSError, ValueError):
            entry["problems"] = [f"stream {i}: no status yet"]
        out.append(entry)
    return out


def with_streams(status: dict, config: Config, state_dir: Path) -> dict:
    """A merge's `status` with each stream's, whose problems are the merge's too."""
    status.setdefault("problems", [])
    status["streams"] = streams_status(config, state_dir)
    for s in status["streams"]:
        status["problems"].extend(s.get("problems", []))
    return status


def _status(leader: Leader, config: Config, state_dir: Path) -> dict:
    return with_streams(leader_status(leader), config, state_dir)


def stream_merge_role(
    config: Config,
    uuid: str,
    heartbeat: bool,
    pauses: Pauses,
    state_dir: Path,
    forks: ForkServer | None = None,
) -> Role:
    """The merge process's `Role`: the pipeline into the streams (and the CN heartbeat)."""
    leader = stream_leader(
        config, state_dir=state_dir, server_uuid=uuid, pauses=pauses, forks=forks
    )
    tasks = {"leader": leader.run}
    if heartbeat:
        tasks["heartbeat"] = functools.partial(heartbeats, config, leader.node, pauses)
    return Role(
        tasks,
        status=functools.partial(_status, leader, config, state_dir),
        binlog_dir=lambda: Path(config.dumper.binlog_dir),
        writer=lambda: None,
        current_notify=lambda: leader.notify,
        merged_tso=leader.merged_tso,
    )
