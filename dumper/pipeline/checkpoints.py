"""The DNs' checkpoints of one run of the pipeline, saved every interval (rule 3 of the restart
protocol, dumper/pipeline/leader.py): for each DN the newest checkpoint whose watermark is
written, saved only once the output made everything up to it durable. While the GMS is away
they wait, the newest per DN kept for the next try, and writing goes on (a restart would only
resume from an older checkpoint)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from cdc.keys import Checkpoint, GlobalKey
from cdc.pauses import GMS, Backoff, Pauses
from dumper.pipeline.metadata import PipelineMetadata
from dumper.pipeline.output import Output
from dumper.pipeline.status import LeaderStats
from merge_joint import MergeJoint
from topology import FileEntry, gms

# A checkpoint save slower than this is shown as a GMS pause while it waits (a GMS that stopped
# answering holds it until `cdc.admin_sql.READ_TIMEOUT_S`).
SLOW_SAVE_S = 2.0


class Checkpoints:
    """The checkpoints of `joint`'s DNs up to `written()` (the key of the last transaction
    written), saved to `metadata` once `output` synced."""

    def __init__(
        self,
        joint: MergeJoint,
        written: Callable[[], GlobalKey | None],
        output: Output,
        metadata: PipelineMetadata,
        stats: LeaderStats,
        pauses: Pauses,
    ):
        self.joint = joint
        self._written = written
        self.output = output
        self.metadata = metadata
        self.stats = stats
        self.pauses = pauses
        # Checkpoints ready but not saved yet (the GMS away): the newest per DN, a bounded queue.
        self.unsaved: dict[int, tuple[GlobalKey, Checkpoint]] = {}

    async def run(self, interval: float) -> None:
        """Checkpoints every `interval` seconds; while the GMS is away they are retried with
        backoff."""
        backoff = Backoff(first=interval, cap=max(interval, 5.0))
        retry_at = 0.0
        while True:
            await asyncio.sleep(interval)
            if time.monotonic() < retry_at:
                self.collect()  # keeps MergeJoint's lists short meanwhile
                continue
            try:
                await self.persist()
            except gms.UNREACHABLE as exc:
                self.pauses.begin(GMS, f"checkpoints not saved: {exc}")
                retry_at = time.monotonic() + backoff.next()
                continue
            if retry_at:
                retry_at = 0.0
                backoff.reset()
            self.pauses.end(GMS)  # (a no-op unless a save failed or was slow)

    def collect(self) -> None:
        written = self._written()
        if written is not None:
            self.unsaved.update(self.joint.checkpoints_upto(written))

    async def persist(self) -> None:
        """Sync the output, then save for each DN the newest checkpoint whose watermark is
        written. The GMS round trips go to a worker thread. A save that fails leaves them for
        the next one (newer ones replace them)."""
        self.output.checkpoint_round(self.joint.merged_tso)
        self.collect()
        if not self.unsaved:
            return
        await self._save(await self.output.sync(self.stats))

    async def _save(self, entry: FileEntry | None) -> None:
        """Save the checkpoints collected (all they cover is durable by now), on a worker
        thread; those saved leave `unsaved` (newer ones collected meanwhile stay)."""
        ready = dict(self.unsaved)
        save = asyncio.ensure_future(
            asyncio.to_thread(self.metadata.save_checkpoints, list(ready.values()), entry)
        )
        done, _ = await asyncio.wait([save], timeout=SLOW_SAVE_S)
        if not done:
            self.pauses.begin(GMS, f"saving checkpoints: no answer for {SLOW_SAVE_S:.0f}s")
        await save
        for dn, item in ready.items():
            if self.unsaved.get(dn) is item:
                del self.unsaved[dn]
