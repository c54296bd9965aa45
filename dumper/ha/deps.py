"""What `HaNode` depends on, as two small interfaces with their production implementations:
the lease store (the GMS) and the builder of each term's `Leader`. `dumper/service.py` wires
the production ones; tests/dumper/ha/ passes in-memory fakes, so that the HA state machine
(candidate → follower ⇄ leader, fencing, terms) runs without a cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from cdc.config import Config, NodeConfig
from cdc.pauses import Pauses
from dumper.pipeline import DnSourceFactory, GmsMetadata, Leader, Term
from merge_source import ForkServer
from topology import DumperLeaseStore, Lease, Member, ServedBound, TermStart, gms, migrate


class LeaseStore(Protocol):
    """The operations of topology's `DumperLeaseStore` that HA uses, awaitable. Lease expiry
    is by the store's clock (the GMS's), never the caller's."""

    async def migrate(self) -> None: ...
    async def current(self) -> Lease | None: ...
    async def try_acquire(self, holder: int, address: str, lease_ms: int) -> int | None: ...
    async def renew(self, holder: int, term: int, lease_ms: int) -> bool: ...
    async def release(self, holder: int, term: int) -> None: ...
    async def record_term(self, start: TermStart) -> None: ...
    async def terms_after(self, term: int, stream: int | None = None) -> list[TermStart]: ...
    async def report(self, member: Member) -> None: ...
    async def members(self) -> list[Member]: ...
    async def record_served(
        self, term: int, holder: int, file: str, position: int, stream: int | None = None
    ) -> bool: ...
    async def served_bounds(
        self, stream: int | None = None
    ) -> list[tuple[TermStart, ServedBound | None]]: ...


class GmsLeaseStore:
    """`DumperLeaseStore` on the GMS: each call on its own short connection in a worker
    thread, so that a GMS that stopped answering holds up no other call (the renewal is
    bounded by a timeout: `Leadership._renew_loop`)."""

    def __init__(self, config: Config):
        self._gms, self._db = config.gms, config.pipeline.meta_database

    def _call(self, fn):
        conn = gms.connect(self._gms)
        try:
            return fn(DumperLeaseStore(conn, self._db))
        finally:
            conn.close()

    async def _run(self, fn):
        return await asyncio.to_thread(self._call, fn)

    async def migrate(self) -> None:
        def run():
            conn = gms.connect(self._gms)
            try:
                migrate(conn, self._db)
            finally:
                conn.close()

        await asyncio.to_thread(run)

    async def current(self) -> Lease | None:
        return await self._run(lambda s: s.current())

    async def try_acquire(self, holder: int, address: str, lease_ms: int) -> int | None:
        return await self._run(lambda s: s.try_acquire(holder, address, lease_ms))

    async def renew(self, holder: int, term: int, lease_ms: int) -> bool:
        return await self._run(lambda s: s.renew(holder, term, lease_ms))

    async def release(self, holder: int, term: int) -> None:
        await self._run(lambda s: s.release(holder, term))

    async def record_term(self, start: TermStart) -> None:
        await self._run(lambda s: s.record_term(start))

    async def terms_after(self, term: int, stream: int | None = None) -> list[TermStart]:
        return await self._run(lambda s: s.terms_after(term, stream))

    async def report(self, member: Member) -> None:
        await self._run(lambda s: s.report(member))

    async def members(self) -> list[Member]:
        return await self._run(lambda s: s.members())

    async def record_served(
        self, term: int, holder: int, file: str, position: int, stream: int | None = None
    ) -> bool:
        return await self._run(lambda s: s.record_served(term, holder, file, position, stream))

    async def served_bounds(
        self, stream: int | None = None
    ) -> list[tuple[TermStart, ServedBound | None]]:
        return await self._run(lambda s: s.served_bounds(stream))


class LeaderBuilder(Protocol):
    """Makes the `Leader` of each term this process wins (`term`: its number, fence and
    takeover timeline); `standby` runs while it follows (to make a later takeover faster),
    `close` once at the end."""

    async def standby(self) -> None: ...
    def build(self, nodes: dict[int, NodeConfig], term: Term) -> Leader: ...
    async def close(self) -> None: ...


class DnLeaders:
    """The production `LeaderBuilder`: a pipeline reading the DNs, metadata in the GMS. A
    follower keeps the MergeSource fork server running: a takeover then forks its workers from
    it at once (13-38 ms for 3), where starting it would take 0.35-0.5 s and more on a loaded
    machine (merge_source/fork_server.py). Idle workers forked ahead of time (`warm_sources`,
    removed) saved the takeover only the forks."""

    def __init__(
        self,
        config: Config,
        server_uuid: str | None = None,
        pauses: Pauses | None = None,
        make: Callable[..., Leader] = Leader,
        forks: ForkServer | None = None,
    ):
        """`make`: builds the pipeline from `Leader`'s arguments (a multi-stream binlog passes
        its `stream_leader`, whose output is the stream processes); `forks`: the fork server
        (None: its own; `cdc start` passes the one it forked before its event loop ran)."""
        self.config = config
        self._make = make
        self.server_uuid = server_uuid  # the GTIDs' sid (None: read from the GMS per build)
        self.pauses = pauses or Pauses()  # every term's pipeline reports its waits here
        self._own_forks = forks is None
        self._forks = (
            forks
            if forks is not None
            else (ForkServer() if config.pipeline.source_processes else None)
        )

    async def standby(self) -> None:
        if self._forks is not None:
            await self._forks.start()  # a no-op while it runs

    def build(self, nodes: dict[int, NodeConfig], term: Term) -> Leader:
        metadata = GmsMetadata(self.config, self.pauses)
        metadata.migrated = True  # by `HaNode.run` (`LeaseStore.migrate`: the same schema)
        factory = DnSourceFactory(self.config, metadata.names_at, self._forks)
        return self._make(
            self.config,
            factory=factory,
            metadata=metadata,
            nodes=nodes,
            server_uuid=self.server_uuid,
            term=term,
            pauses=self.pauses,
        )

    async def close(self) -> None:
        if self._forks is not None and self._own_forks:
            await self._forks.aclose()
