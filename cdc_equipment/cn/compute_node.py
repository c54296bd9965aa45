"""ComputeNode: the reference CN built from `Config`; the one object tests, workloads and the CLI
use to write to the cluster."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pymysql

from cdc.cn_protocol.catalogue import Catalogue
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.errors import TransactionAborted
from cdc.cn_protocol.protocol_node import ProtocolNode
from cdc.config import Config
from cdc_equipment.cn import ddl, markers, scale_out
from cdc_equipment.cn.cluster_change import Progress, reload_catalogue
from cdc_equipment.cn.context import CnContext
from cdc_equipment.cn.job_crash_points import JobCrashPoints
from cdc_equipment.cn.job_log import JobLog
from cdc_equipment.cn.jobs import JobRunner
from cdc_equipment.cn.membership import Membership
from cdc_equipment.cn.transaction import Transaction

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors after which the whole transaction may simply be run again.
ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK = 1205, 1213
RETRYABLE_ERRNOS = {ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK, 1614}  # 1614: XA_RBDEADLOCK


class ComputeNode(ProtocolNode):
    """`cn = ComputeNode(config); await cn.start(); async with cn.transaction() as tx: ...`
    (heartbeats, markers and recovery are the protocol's: `ProtocolNode`)."""

    store: CatalogueStore
    _ctx: CnContext | None
    jobs: JobRunner | None = None  # cluster changes as jobs (set once started)

    def __init__(self, config: Config, *, job_crash_points: JobCrashPoints | None = None, **kw):
        super().__init__(config, **kw)
        self._job_crash = job_crash_points or JobCrashPoints()

    def _make_store(self) -> CatalogueStore:
        return CatalogueStore(self._connect_gms, self.config.cn.catalogue_database)

    async def _load_catalogue(self) -> Catalogue:
        # The protocol's start needs the storage DNs only (recovery runs on them); the whole
        # catalogue is read once, by the membership's registration in `start` below, at the
        # catalogue version this process registers with.
        return Catalogue(dns=await self.store.storage_dns())

    def _make_context(self, **fields: Any) -> CnContext:
        return CnContext(**fields)

    @property
    def ctx(self) -> CnContext:
        return super().ctx  # type: ignore[return-value]

    @property
    def catalogue(self) -> Catalogue:
        return self.ctx.catalogue

    async def start(self, *, recover: bool = True, recovery_grace_s: float = 1.0) -> None:
        """The protocol's start, then join the CN processes (`membership.py`): registering
        loads the catalogue, and from here on this process follows the cluster's versions."""
        await super().start(recover=recover, recovery_grace_s=recovery_grace_s)
        await self.store.ensure_schema()  # a catalogue made by an older version: add tables
        cn = self.config.cn
        self.jobs = JobRunner(
            self.ctx,
            self.store,
            JobLog(lambda statements: self.ctx.membership.run(statements), cn.catalogue_database),
            {"ddl": ddl.DdlJob(), "add-dn": scale_out.AddDnJob(), "move": scale_out.MoveJob()},
            self._job_crash,
        )
        membership = Membership(
            self._connect_gms,
            cn.catalogue_database,
            self.ctx.gate,
            self.reload_catalogue,
            lease_s=cn.lease_ms / 1000,
            interval_s=cn.sync_interval_ms / 1000,
            takeover=self.jobs.takeover,  # a dead CN's change or job: finish it
        )
        await membership.start(self.ctx.instance_id, cn.server_id)
        self.ctx.membership = membership

    async def close(self) -> None:
        if self._ctx is not None and self._ctx.membership is not None:
            await self._ctx.membership.close()
        await super().close()

    async def reload_catalogue(self) -> None:
        """Re-read the catalogue, learning the addresses of DNs added since this process
        started (the follower calls it on every new catalogue version)."""
        await reload_catalogue(self.ctx, self.store)

    # -- transactions --------------------------------------------------------------------------
    def transaction(self, db: str | None = None) -> Transaction:
        return Transaction(self.ctx, default_db=db)

    async def run_transaction(
        self,
        body: Callable[[Transaction], Awaitable[T]],
        *,
        db: str | None = None,
        retries: int = 5,
    ) -> tuple[T, int | None]:
        """Run `body(tx)` and commit, retrying on deadlocks/aborts; returns (result, commit TSO)."""
        for attempt in range(retries + 1):
            tx = self.transaction(db)
            try:
                async with tx:
                    result = await body(tx)
                return result, tx.commit_tso
            except (TransactionAborted, pymysql.err.OperationalError) as exc:
                code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
                if isinstance(exc, pymysql.err.OperationalError) and code not in RETRYABLE_ERRNOS:
                    raise
                if attempt == retries:
                    raise
                await asyncio.sleep(0.005 * (attempt + 1))
        raise AssertionError("unreachable")

    # -- markers, DDL, scale-out ------------------------------------------------------------
    def topology(self) -> dict[str, Any]:
        return markers.topology(self.ctx)

    async def execute_ddl(
        self,
        sql: str,
        *,
        db: str | None = None,
        shard_key: str | None = None,
        partitions: int = ddl.DEFAULT_PARTITIONS,
        broadcast: bool = False,
        progress: Progress | None = None,
    ) -> int | None:
        """Run a logical DDL statement as a job; returns the DDL record's TSO (None if
        IF [NOT] EXISTS made it a no-op). Run again after it was interrupted, it resumes it."""
        spec = ddl.ddl_spec(
            sql, default_db=db, shard_key=shard_key, partitions=partitions, broadcast=broadcast
        )
        return await self.jobs.run("ddl", spec, progress)

    async def add_dn(
        self, dn_id: int, progress: Progress | None = None
    ) -> scale_out.ScaleOutResult:
        """Add DN `dn_id` (a job: broadcast tables frozen while they are copied to it), then
        move its share of partitions to it, a job per partition: only the partition being
        copied is frozen, on every CN, while it is copied and switched."""
        return await self.jobs.run("add-dn", {"dn": dn_id}, progress)

    async def move_partition(
        self, db: str, table: str, partition: int, dn_id: int, progress: Progress | None = None
    ) -> int | None:
        """Move one partition to DN `dn_id` (a job); MetaChange's TSO, None if already there."""
        spec = {"db": db, "table": table, "partition": partition, "target": dn_id}
        return await self.jobs.run("move", spec, progress)


@asynccontextmanager
async def connect(config: Config, pool_size: int = 4) -> AsyncIterator[ComputeNode]:
    """A short-lived CN for a tool's few writes (a `cdc.cn_protocol.client.CnConnector` with
    `functools.partial(connect, config)`): no XA recovery (the long-lived CNs own that)."""
    cn = ComputeNode(config, pool_size=pool_size)
    await cn.start(recover=False)
    try:
        yield cn
    finally:
        await cn.close()
