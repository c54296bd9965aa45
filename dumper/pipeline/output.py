"""Where a `Leader` puts what MergeJoint merged (`Output`): the binlog files of a single-stream
binlog (`BinlogOutput`), or the stream processes of a multi-stream one
(`dumper.streams.StreamOutput`). The Leader runs the pipeline around it (sources, restarts,
checkpoints, the fence); the output holds the writer(s) and the encoder(s), and is what
differs between the two."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cdc.keys import GlobalKey
    from dumper.pipeline.status import LeaderStats
    from merge_joint import Transaction
    from topology import FileEntry

# A streamed (spilled) transaction goes to the writer in parts of about this many bytes, with
# the event loop free in between (dump clients, lease renewal, status).
STREAM_PART_BYTES = 4 << 20

# Raises if this process may no longer write (an HA term's lease ran out: `Term.fence`).
Fence = Callable[[], None]


class LeaderError(RuntimeError):
    """The pipeline cannot continue; the message names the stage and what to do."""


class DiskFull(RuntimeError):
    """The binlog file system is full: the writer stopped at its last whole transaction."""


class Output(Protocol):
    """What the pipeline writes into, and how what it wrote is made durable and ended."""

    async def prepare(self) -> None:
        """Before each start of the pipeline, on the event loop (the stream processes are
        started and say where they end)."""

    def last_key(self) -> GlobalKey | None:
        """The key of the last transaction durably written: the pipeline resumes after it
        (in a worker thread, before the sources start)."""
        ...

    def rotate(self) -> str:
        """FlushLogs: the binlog goes on in a new file (MergeJoint calls it)."""
        ...

    async def write(
        self, ready: list[Transaction], stats: LeaderStats, fence: Fence | None
    ) -> None:
        """One merged batch encoded and written (or sent), counted in `stats`; `fence` is
        called between the parts of a huge transaction. A full file system raises `DiskFull`."""

    def checkpoint_round(self, merged_tso: int) -> None:
        """Each round of the checkpoint loop, saved or not (the streams: a dead one raises,
        and each is told the merged TSO, so an idle stream's lag stays low)."""

    async def sync(self, stats: LeaderStats) -> FileEntry | None:
        """Everything written made durable, before the checkpoints up to it are saved; the
        newest file's entry for the GMS's file index (None: the files are elsewhere)."""
        ...

    async def reopen(self, error: DiskFull) -> None:
        """After `error`: open again at the last whole transaction once there is room (raises
        `LeaderError` if it cannot)."""

    def end(self) -> tuple[str, int, int]:
        """(file, GTID number, position) where the binlog ends, for the status."""
        ...

    def close(self, may_write: bool) -> None:
        """The pipeline ends: cleanly, or, when the fence refuses (`may_write` false: an HA
        term that ended), leaving nothing more, not even a STOP event."""

    async def aclose(self, may_write: bool) -> None:
        """What ends on the event loop, after `close` (or instead, when a cancel cut the
        pipeline's way out short)."""
