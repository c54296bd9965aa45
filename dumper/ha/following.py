"""A follower's part (docs/dumper.md, "High availability"): it copies the leader's files byte
for byte (COM_BINLOG_DUMP from the leader's own dump server: `LeaderCopy`, each stream's copy
from the leader's stream port), acknowledges what it made durable (the leader serves its other
consumers only that), and looks at the lease again when it would run out (`Follower`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from binlog_writer import BinlogCopier, CopyError
from cdc.config import Config
from cdc.protocol import BinlogPosition, DumpClient, DumpError
from cdc.streams import STREAM_PROGRESS_FILE
from cdc.tasks import cancel_and_wait
from dumper.ha.copies import CopyTarget, copy_ends
from dumper.ha.deps import LeaseStore
from dumper.ha.election import one_end
from dumper.ha.peers import leader_dump_settings
from dumper.ha.state import HaState
from dumper.server import ack_packet
from topology import Lease

log = logging.getLogger(__name__)

# The leader's 1236 for a file it does not list (binlog_sender.MSG_UNKNOWN_FILE, MySQL's text).
MSG_PURGED = "Could not find first log file name"


class CopyServers(Protocol):
    """The servers of a multi-stream follower's copies (`dumper.ha.stream_term`)."""

    def start(self) -> None: ...
    async def stop(self) -> None: ...


@dataclass(slots=True)
class FollowerProgress:
    leader: str = ""
    leader_id: int = 0
    file: str = ""
    position: int = 0
    leader_file: str = ""
    leader_position: int = 0
    last_copy_at: float = 0.0


class LeaderCopy:
    """The default copy of a follower: every copy it keeps (`copies`), dumped from the leader
    named by a lease, until the dump ends."""

    def __init__(
        self, config: Config, copies: list[CopyTarget], progress: FollowerProgress, acks: bool
    ):
        """`acks`: the leader waits for our acknowledgements (`serve_acknowledged_only`)."""
        self.config = config
        self.copies = copies
        self.progress = progress
        self.acks = acks
        self.notify = asyncio.Event()  # set after each copied batch (the dump server)
        self.copied_at = 0.0  # monotonic: the leader was last heard (copy data or heartbeat)

    async def __call__(self, lease: Lease) -> None:
        """Copy every stream this process keeps; the first that ends ends them all, as the
        single copy's end does (the follower then looks at the lease again and copies on)."""
        if len(self.copies) == 1:
            await self._copy_one(lease, self.copies[0])
            return
        tasks = [
            asyncio.create_task(self._copy_one(lease, c), name=f"ha-copy-stream{c.stream}")
            for c in self.copies
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(tasks)
            # Every copy's error is looked at (a leader that died ends them all); the first
            # one is raised.
            errors = [t.exception() for t in tasks if t.done() and not t.cancelled()]
        for error in errors:
            if error is not None:
                raise error

    async def _copy_one(self, lease: Lease, target: CopyTarget) -> None:
        d = self.config.dumper
        if target.stream is not None:
            # A copy ends at its last whole transaction: a progress this process saved when
            # it led this stream (an older term) says nothing of what the copy holds now.
            (target.dir / STREAM_PROGRESS_FILE).unlink(missing_ok=True)
        copier = BinlogCopier(target.dir, base=d.binlog_base)
        file, pos = copier.resume_point()
        settings = leader_dump_settings(d, lease, address=target.leader_address(lease))
        client = DumpClient(settings, BinlogPosition(file, pos))
        acker = (
            asyncio.create_task(self._ack_loop(client, copier), name="ha-ack")
            if self.acks
            else None
        )
        acked = copier.synced
        try:
            async for batch in client.batches():
                self.copied_at = time.monotonic()
                for ev in batch:
                    copier.add(ev.file, ev.pos, ev.data)
                if acker is None:
                    copier.maybe_sync()
                else:
                    # The leader holds its consumers back until we acknowledge: fsync each
                    # batch (one per read from the socket: group commit) and say so at once.
                    copier.sync()
                    if copier.synced != acked:
                        acked = copier.synced
                        client.reply(ack_packet(*acked))
                if target.stream is None:
                    self.progress.file, self.progress.position = copier.file, copier.pos
                self.progress.last_copy_at = time.time()
                self.notify.set()
                self.notify = asyncio.Event()
        finally:
            if acker is not None:
                await cancel_and_wait([acker])
            copier.close()
            await client.close()

    async def _ack_loop(self, client: DumpClient, copier: BinlogCopier) -> None:
        """Repeat the acknowledgement while nothing new arrives: the leader counts a follower
        only while it heard from it within `lease_ms`."""
        every = self.config.dumper.lease_ms / 1000 / 5
        while True:
            if copier.synced[0]:
                client.reply(ack_packet(*copier.synced))
            await asyncio.sleep(every)


class Follower:
    """Follows the holder of a lease for as long as it holds it: `copy` copies its files, once
    every copy is a prefix of its term (`align`: cut back to where the term began);
    `standby` readies a takeover meanwhile (`LeaderBuilder.standby`)."""

    def __init__(
        self,
        config: Config,
        state: HaState,
        store: LeaseStore,
        copy: Callable[[Lease], Awaitable[None]],
        align: Callable[[int], Awaitable[bool]],
        standby: Callable[[], Awaitable[None]],
        copies: list[CopyTarget],
        progress: FollowerProgress,
        copy_servers: CopyServers | None,
    ):
        self.config = config
        self.state = state
        self.store = store
        self._copy_from = copy
        self._align = align
        self._standby = standby
        self.copies = copies
        self.progress = progress
        # Several streams: the servers of the stream copies while following (their ports are
        # the leading stream processes' while this process leads).
        self._copy_servers = copy_servers
        self._purged_hint = 0  # the term whose leader was found without our next file

    async def follow(self, lease: Lease) -> None:
        """Copy the leader's files until its lease ends or another term begins."""
        state, d = self.state, self.config.dumper
        if state.role != "follower" or state.term != lease.term:
            log.info(
                "dumper %d: following dumper %d at %s (term %d)",
                d.id,
                lease.holder,
                lease.address,
                lease.term,
            )
        state.follow(lease.term)
        await self._standby()
        self.progress.leader, self.progress.leader_id = lease.address, lease.holder
        if not await self._align(lease.term):
            await asyncio.sleep(0.1)  # the new leader records its start right after the lease
            return
        copy = asyncio.create_task(self._copy_from(lease), name="ha-copy")
        renew_s = d.lease_renew_ms / 1000
        now: Lease | None = lease
        try:
            if self._copy_servers is not None:
                self._copy_servers.start()  # (in the background; a no-op while they run)
            while not copy.done():
                # Look again when the lease would run out if not renewed meanwhile: a dead
                # leader's lease is seen expired within ~50 ms, not up to a renew interval.
                wait = min(renew_s, max(0.05, now.remaining_s + 0.02)) if now else renew_s
                await asyncio.wait([copy], timeout=wait)
                now = await self.store.current()
                if now is None or not now.live or now.term != lease.term:
                    if now is None or not now.live:
                        state.lease_free_at = time.monotonic()
                    return
            copy.result()
        except (DumpError, CopyError, ConnectionError, OSError) as exc:
            if MSG_PURGED in str(exc):
                # Retried, but in vain until the copy is seeded again: said once per term.
                if self._purged_hint != lease.term:
                    self._purged_hint = lease.term
                    log.error(
                        "dumper %d: dumper %d at %s no longer has the file this copy continues "
                        "in (%s:%d; purged while this dumper was away): stop this dumper, run "
                        "`cdc ha reseed --dumper-id %d` and start it again",
                        d.id,
                        lease.holder,
                        lease.address,
                        *one_end(copy_ends(self.copies, d.binlog_base)),
                        d.id,
                    )
            else:
                log.warning("dumper %d: copy from %s stopped: %s", d.id, lease.address, exc)
            await asyncio.sleep(1.0 if MSG_PURGED in str(exc) else 0.2)
        finally:
            copy.cancel()
            with contextlib.suppress(BaseException):
                await copy
