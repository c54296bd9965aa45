"""Waiting for room on a full file system (docs/faults.md): the binlog's, before the writer
opens again at its last whole transaction (the single stream's pipeline and each stream's
process), and the spill directory's, before the pipeline restarts."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

from binlog_writer import BinlogWriter
from cdc.pauses import BINLOG_DISK_FULL, SPILL_DISK_FULL, Backoff, Pauses, is_disk_full
from dumper.pipeline.output import STREAM_PART_BYTES

# A full binlog file system: writing resumes once this much is free (one streamed part: a
# pipeline restart for a few bytes would only fill it again at once).
DISK_FREE_TO_RESUME = STREAM_PART_BYTES


async def reopen_with_room(
    directory: Path, error: str, pauses: Pauses, open_writer: Callable[[], BinlogWriter]
) -> BinlogWriter:
    """After a write to the binlog failed on a full file system (`error`): paused
    (BINLOG_DISK_FULL) until `directory`'s file system has room and `open_writer` opens a
    writer again (its recovery cuts what the failed write left after the last whole
    transaction). The single stream's pipeline and each stream's process (dumper/streams)."""
    pauses.begin(BINLOG_DISK_FULL, f"{directory}: {error}")
    backoff = Backoff()
    while True:
        await until_room(directory, BINLOG_DISK_FULL, error, pauses, backoff)
        try:
            writer = await asyncio.to_thread(open_writer)
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            continue
        pauses.end(BINLOG_DISK_FULL)
        return writer


async def spill_room(directory: Path, error: str, pauses: Pauses) -> None:
    """Until the spill `directory` has room again (paused: SPILL_DISK_FULL); the pipeline
    then restarts (the huge transaction is read and spilled again)."""
    pauses.begin(SPILL_DISK_FULL, f"{directory}: {error}")
    await asyncio.sleep(0.2)
    await until_room(directory, SPILL_DISK_FULL, error, pauses, Backoff())
    pauses.end(SPILL_DISK_FULL)


async def until_room(
    directory: Path, reason: str, error: str, pauses: Pauses, backoff: Backoff
) -> None:
    """Until `directory`'s file system has `DISK_FREE_TO_RESUME` bytes free."""
    while True:
        await asyncio.sleep(backoff.next())
        free = shutil.disk_usage(directory).free
        if free >= DISK_FREE_TO_RESUME:
            return
        pauses.begin(
            reason,
            f"{directory}: {free} bytes free, resumes at {DISK_FREE_TO_RESUME} ({error})",
        )
