"""Many CN processes, one catalogue (docs/cn.md, "Several CN processes").

Every CN process is a *member*: a row in the GMS (`cn_member`) with a lease it renews every
`[cn] sync_interval_ms` and the catalogue version it has applied. The version and the set of
*frozen* partitions live in one GMS row (`cn_change`). A change (a logical DDL, a partition
move, an added DN) is made by one CN at a time, its owner (`cluster_change.py`):

1. it takes the change lock (`owner`; a dead owner's lock is taken over) and re-reads the
   catalogue;
2. it publishes version V+1 freezing the partitions it will touch, and waits until every live
   member has acknowledged V+1. A member acknowledges once it starts no transaction on those
   partitions and its running ones there have ended (`PartitionGate.freeze`);
3. it settles the in-doubt XA branches of dead members;
4. it makes the change, saves the catalogue and publishes V+2 with nothing frozen. A member
   reloads the catalogue before it unfreezes: no CN writes through a stale placement or schema.

A member that cannot renew its lease stops itself before the others may count it dead: it
suspends new transactions and refuses commits (`lease_ok`) until it has registered again and
caught up. Members register with the version read under a shared lock on `cn_change`, so one
joining during a change starts frozen. A closing member deletes its row; a killed one is ignored
once its lease has run out (`lease_until` is GMS time: no clocks are compared across hosts). A
change whose owner died, or a job (`cdc_equipment/cn/job_log.py`) whose owner died, is taken over by the first
member that sees it (`takeover`: `cdc_equipment/cn/jobs.py` finishes the job or rolls it back, then thaws).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pymysql

from cdc.cn_protocol.dn_conn import DnConnection
from cdc.cn_protocol.errors import CatalogueError
from cdc.cn_protocol.gms import Statements, execute
from cdc_equipment.cn.partition_gate import PartitionGate, PartitionKey

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Member:
    instance_id: int
    server_id: int
    host: str
    pid: int
    acked_version: int

    def __str__(self) -> str:
        return (
            f"CN instance {self.instance_id} (server_id {self.server_id}, "
            f"pid {self.pid} on {self.host})"
        )


def _keys(text: str) -> set[PartitionKey]:
    return {(db, table, int(p)) for db, table, p in json.loads(text)}


class Membership:
    """This process's membership: its lease, the follower that applies catalogue versions, and
    the primitives a change's owner uses (`try_lock`, `publish`, `live`)."""

    def __init__(
        self,
        connect_gms: Callable[[], Awaitable[DnConnection]],
        catalogue_db: str,
        gate: PartitionGate,
        reload: Callable[[], Awaitable[None]],
        *,
        lease_s: float,
        interval_s: float,
        takeover: Callable[[], Awaitable[None]],
    ):
        self._connect = connect_gms
        self.db = catalogue_db
        self._gate = gate
        self._reload = reload
        self._takeover = takeover
        self._taking_over: asyncio.Task | None = None
        self._next_takeover = 0.0  # monotonic: not before it
        self._takeover_seen: tuple = ()  # what was last logged as taken over
        self.lease_s = lease_s
        self.interval_s = interval_s
        self.instance_id = 0
        self.server_id = 0
        self.applied = 0  # the catalogue version this process runs
        self._frozen: set[PartitionKey] = set()
        self._valid_until = 0.0  # monotonic: new transactions and commits only before it
        self._lapsed = False
        self._conn: DnConnection | None = None
        self._conn_lock = asyncio.Lock()
        self._task: asyncio.Task | None = None
        self._switching: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._applied_changed = asyncio.Condition()

    # -- SQL on the member's own GMS connection ------------------------------------------------
    async def run(self, statements: Statements) -> list[list]:
        """Rows of each statement (its affected-row count for one without a result set); one
        batch at a time on the connection (the follower and a change's owner share it)."""
        async with self._conn_lock:
            if self._conn is None or self._conn.closed:
                self._conn = await self._connect()
            try:
                return await execute(self._conn, statements)
            except BaseException:
                self._conn.close()
                self._conn = None
                raise

    def _lease_until(self) -> str:
        return f"NOW(6) + INTERVAL {int(self.lease_s * 1_000_000)} MICROSECOND"

    def _deadline(self, sent: float) -> float:
        # Measured from before the renewal was sent, minus two intervals for a late wake-up:
        # this process stops writing before the GMS can count it dead.
        return sent + self.lease_s - 2 * self.interval_s - 0.2

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, instance_id: int, server_id: int) -> None:
        """Register (frozen like the others if a change is under way), load the catalogue and
        follow the versions."""
        self.instance_id, self.server_id = instance_id, server_id
        await self._register()
        self._task = asyncio.create_task(self._follow(), name=f"cn-member-{instance_id}")

    async def _register(self) -> None:
        sent = time.monotonic()
        _, (row,), _, _ = await self.run(
            [
                ("BEGIN", None),
                (
                    f"SELECT version, frozen FROM `{self.db}`.cn_change WHERE id = 1 "
                    "LOCK IN SHARE MODE",
                    None,
                ),
                (
                    f"REPLACE INTO `{self.db}`.cn_member (instance_id, server_id, host, pid, "
                    f"lease_until, acked_version) VALUES (%s, %s, %s, %s, {self._lease_until()}, "
                    "%s)",
                    (
                        self.instance_id,
                        self.server_id,
                        socket.gethostname()[:255],
                        os.getpid(),
                        self.applied,  # what it runs; the version read is acknowledged below
                    ),
                ),
                ("COMMIT", None),
            ]
        )
        await self._switch(int(row[0]), _keys(row[1]))
        await self.run([self._ack()])
        self._valid_until = self._deadline(sent)

    def _ack(self) -> tuple[str, tuple]:
        # GREATEST: a renewal queued before a newer acknowledgement must not undo it.
        return (
            f"UPDATE `{self.db}`.cn_member SET lease_until = {self._lease_until()}, "
            "acked_version = GREATEST(acked_version, %s) WHERE instance_id = %s",
            (self.applied, self.instance_id),
        )

    async def close(self) -> None:
        for task in (self._task, self._switching, self._taking_over):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        with contextlib.suppress(pymysql.err.MySQLError, OSError):
            # Leave at once: a change need not wait for this lease to run out.
            await self.run(
                [(f"DELETE FROM `{self.db}`.cn_member WHERE instance_id = %s", (self.instance_id,))]
            )
        if self._conn is not None:
            self._conn.close()

    def lease_ok(self) -> bool:
        """May this process commit now? False once its lease may have run out in the GMS."""
        return not self._lapsed and time.monotonic() < self._valid_until

    # -- the follower ----------------------------------------------------------------------------
    async def _follow(self) -> None:
        while True:
            try:
                await self._step()
            except (pymysql.err.MySQLError, OSError) as exc:
                log.warning("CN instance %s: GMS unreachable (%s)", self.instance_id, exc)
            if not self._lapsed and time.monotonic() >= self._valid_until:
                log.warning("CN instance %s: lease not renewed; writes paused", self.instance_id)
                self._lapsed = True
                self._gate.suspend()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await self._wake.wait()
            self._wake.clear()

    def poke(self) -> None:
        """Poll now (this process just published a version)."""
        self._wake.set()

    async def _step(self) -> None:
        sent = time.monotonic()
        (renewed,), ((version, frozen, owner, what, orphaned, orphan_jobs),) = await self.run(
            [
                self._ack(),  # renews the lease, and repeats the acknowledgement if it was lost
                (
                    f"SELECT c.version, c.frozen, c.owner, c.what, c.owner IS NOT NULL AND "
                    f"m.instance_id IS NULL, (SELECT COUNT(*) FROM `{self.db}`.cn_job j WHERE "
                    f"j.state = 'running' AND j.owner NOT IN (SELECT instance_id FROM "
                    f"`{self.db}`.cn_member WHERE lease_until > NOW(6))) FROM "
                    f"`{self.db}`.cn_change c LEFT JOIN `{self.db}`.cn_member m ON "
                    "m.instance_id = c.owner AND m.lease_until > NOW(6) WHERE c.id = 1",
                    None,
                ),
            ]
        )
        if not renewed or self._lapsed:  # counted dead (row gone) or paused: catch up first
            log.warning("CN instance %s: lease lapsed; catching up", self.instance_id)
            self._lapsed = True
            self._gate.suspend()
            if self._switching is not None:
                await asyncio.shield(self._switching)  # commits are refused now: it drains
            await self._register()
            self._lapsed = False
            await self._gate.resume()
            return
        self._valid_until = self._deadline(sent)
        idle = self._taking_over is None or self._taking_over.done()
        if (orphaned or orphan_jobs) and idle and time.monotonic() >= self._next_takeover:
            # Not every poll: another CN (holding the lock) may be finishing it already.
            self._next_takeover = time.monotonic() + 5 * self.interval_s
            seen = (owner, what, int(orphan_jobs))
            if seen != self._takeover_seen:
                self._takeover_seen = seen
                log.warning(
                    "CN instance %s: taking over %s of a dead CN",
                    self.instance_id,
                    f"the change {what!r} of CN instance {owner}" if orphaned else "a job",
                )
            # In a task: a job may take a while, and the lease must not lapse meanwhile.
            self._taking_over = asyncio.create_task(self._takeover())
        if int(version) != self.applied and (self._switching is None or self._switching.done()):
            # In a task: draining a partition may take a while, the lease must not lapse meanwhile.
            self._switching = asyncio.create_task(self._acknowledge(int(version), _keys(frozen)))

    async def _acknowledge(self, version: int, frozen: set[PartitionKey]) -> None:
        try:
            await self._switch(version, frozen)
            await self.run([self._ack()])
        except (pymysql.err.MySQLError, OSError) as exc:  # the next poll tries again
            log.warning("CN instance %s: catalogue version %s: %s", self.instance_id, version, exc)
        self.poke()

    async def _switch(self, version: int, frozen: set[PartitionKey]) -> None:
        """Run catalogue `version`: freeze what it freezes (running transactions there end
        first), reload, then unfreeze what it no longer freezes."""
        new, gone = frozen - self._frozen, self._frozen - frozen
        if new:
            await self._gate.freeze(new)
        self._frozen |= new
        await self._reload()  # before anything is unfrozen: never a stale placement
        if gone:
            await self._gate.thaw(gone)
        self._frozen = frozen
        async with self._applied_changed:
            self.applied = version
            self._applied_changed.notify_all()

    async def wait_applied(self, version: int) -> None:
        """Until this process runs catalogue `version` or a later one."""
        async with self._applied_changed:
            await self._applied_changed.wait_for(lambda: self.applied >= version)

    # -- what a change's owner uses --------------------------------------------------------------
    async def try_lock(self, what: str) -> tuple[bool, str]:
        """Take the change lock; (False, the current owner's change) if a live CN holds it."""
        ((n,), rows) = await self.run(
            [
                (
                    f"UPDATE `{self.db}`.cn_change SET owner = %s, what = %s WHERE id = 1 AND "
                    f"(owner IS NULL OR owner = %s OR owner NOT IN (SELECT instance_id FROM "
                    f"`{self.db}`.cn_member WHERE lease_until > NOW(6)))",
                    (self.instance_id, what[:255], self.instance_id),
                ),
                (f"SELECT owner, what FROM `{self.db}`.cn_change WHERE id = 1", None),
            ]
        )
        owner, current = rows[0]
        return owner == self.instance_id, f"{current!r} of CN instance {owner}"

    async def release(self) -> None:
        """Give the change lock up without a new version (a job's thaw published it)."""
        await self.run(
            [
                (
                    f"UPDATE `{self.db}`.cn_change SET owner = NULL, what = '' WHERE id = 1 AND "
                    "owner = %s",
                    (self.instance_id,),
                )
            ]
        )

    async def publish(self, frozen: set[PartitionKey], *, release: bool) -> int:
        """A new catalogue version freezing `frozen` (the lock kept, or released)."""
        release_sql = ", owner = NULL, what = ''" if release else ""
        _, (n,), rows, _ = await self.run(
            [
                ("BEGIN", None),
                (
                    f"UPDATE `{self.db}`.cn_change SET version = version + 1, frozen = %s"
                    f"{release_sql} WHERE id = 1 AND owner = %s",
                    (json.dumps(sorted(frozen)), self.instance_id),
                ),
                (f"SELECT version FROM `{self.db}`.cn_change WHERE id = 1", None),
                ("COMMIT", None),
            ]
        )
        if not n:
            raise CatalogueError(
                f"CN instance {self.instance_id} lost the change lock (its lease ran out)"
            )
        self.poke()
        return int(rows[0][0])

    async def live(self) -> list[Member]:
        (rows,) = await self.run(
            [
                (
                    "SELECT instance_id, server_id, host, pid, acked_version FROM "
                    f"`{self.db}`.cn_member WHERE lease_until > NOW(6) ORDER BY instance_id",
                    None,
                )
            ]
        )
        return [Member(int(r[0]), int(r[1]), r[2], int(r[3]), int(r[4])) for r in rows]
