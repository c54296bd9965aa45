"""How a stream's process is started (`stream_process.py`): by the merge on its own host
(`stream_set.py`) or by a stream's listener on another (`listener.py`). A module of its own:
the process's module imports the service, which imports these two."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from cdc.config import Config
from dumper.child_process import spawn

STREAM_PROCESS = "dumper.streams.stream_process"


async def spawn_stream(
    config: Config,
    stream: int,
    cluster_uuid: str,
    state_dir: Path,
    term: int = 0,
    link_fd: int | None = None,
) -> asyncio.subprocess.Process:
    """Stream `stream`'s process (`stream_process.main`), its frames on its stdin (the merge's
    pipes), or with `link_fd` on that TCP socket (listener.py): the one place that writes the
    spec `main` reads. `term`: the HA lease term the merge leads in (0: no HA)."""
    spec = {
        "config": config,
        "stream": stream,
        "cluster_uuid": cluster_uuid,
        "state_dir": str(state_dir),
        "term": term,
        "log_level": logging.getLogger().getEffectiveLevel(),
    }
    if link_fd is not None:
        spec["frames_fd"] = link_fd
    return await spawn(STREAM_PROCESS, spec, pass_fds=() if link_fd is None else (link_fd,))
