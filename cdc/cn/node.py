"""ComputeNode: the reference CN built from `Config`; the one object tests, workloads and the CLI
use to write to the cluster."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pymysql

from cdc.cn import ddl, heartbeat, markers, recovery, scale_out, schema
from cdc.cn.catalogue import Catalogue
from cdc.cn.catalogue_store import CatalogueStore
from cdc.cn.context import CnContext
from cdc.cn.crash_points import CrashPoints
from cdc.cn.dn_conn import DnConnection
from cdc.cn.dn_pool import DnPools, connect
from cdc.cn.errors import CnError, TransactionAborted
from cdc.cn.ground_truth import GroundTruthLog
from cdc.cn.purge import purge_commit_records
from cdc.cn.record_batch import CommitRecords
from cdc.cn.recovery import RecoveryReport
from cdc.cn.transaction import Transaction
from cdc.cn.tso import TsoOracle
from cdc.config import Config

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors after which the whole transaction may simply be run again.
ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK = 1205, 1213
RETRYABLE_ERRNOS = {ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK, 1614}  # 1614: XA_RBDEADLOCK


class ComputeNode:
    """`cn = ComputeNode(config); await cn.start(); async with cn.transaction() as tx: ...`"""

    def __init__(
        self,
        config: Config,
        *,
        crash_points: CrashPoints | None = None,
        pool_size: int = 64,
    ):
        self.config = config
        self._crash = crash_points or CrashPoints()
        self.pools = DnPools(config.dn, maxsize=pool_size)
        self.store = CatalogueStore(self._connect_gms, config.cn.catalog_database)
        self.tso = TsoOracle(self._connect_gms, config.cn.catalog_database)
        self._ctx: CnContext | None = None
        self._heartbeat: heartbeat.Heartbeat | None = None

    async def _connect_gms(self) -> DnConnection:
        return await connect(self.config.gms)

    @property
    def ctx(self) -> CnContext:
        if self._ctx is None:
            raise CnError("the CN is not started: call `await cn.start()` first")
        return self._ctx

    @property
    def catalogue(self) -> Catalogue:
        return self.ctx.catalogue

    @property
    def instance_id(self) -> int:
        return self.ctx.instance_id

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, *, recover: bool = True, recovery_grace_s: float = 1.0) -> None:
        """Load the catalogue, register this CN instance and settle orphaned XA branches."""
        catalogue = await self.store.load()
        instance_id = await self.store.register_instance(self.config.cn.server_id)
        self._ctx = CnContext(
            config=self.config,
            pools=self.pools,
            tso=self.tso,
            catalogue=catalogue,
            instance_id=instance_id,
            records=CommitRecords(self.pools),
            crash=self._crash,
            ground_truth=GroundTruthLog(self.config.cn.ground_truth_log or None),
        )
        self._heartbeat = heartbeat.Heartbeat(self._ctx)
        if recover:
            report = await recovery.recover_at_start(self._ctx, recovery_grace_s)
            if report.committed or report.rolled_back or report.skipped:
                log.info("start-up recovery: %s", report.summary())

    async def close(self) -> None:
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        await self.tso.close()
        if self._ctx is not None:
            await self._ctx.records.close()
        await self.pools.close()
        if self._ctx is not None:
            self._ctx.ground_truth.close()

    async def __aenter__(self) -> ComputeNode:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def reload_catalogue(self) -> None:
        """Re-read the catalogue (after another CN process changed it)."""
        self.ctx.catalogue = await self.store.load()

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

    # -- heartbeats, markers, DDL, scale-out, recovery -----------------------------------------
    async def heartbeat_once(self) -> int:
        return await heartbeat.beat(self.ctx)

    def start_heartbeat(self) -> None:
        self._heartbeat.start()

    async def stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            await self._heartbeat.stop()

    @property
    def heartbeat(self) -> heartbeat.Heartbeat:
        return self._heartbeat

    def topology(self) -> dict[str, Any]:
        return markers.topology(self.ctx)

    async def write_instruction(self, type_: str, content: dict[str, Any]) -> int:
        return await markers.write_instruction(self.ctx, type_, content)

    async def flush_logs(self) -> int:
        return await markers.write_instruction(self.ctx, schema.FLUSH_LOGS, {})

    async def execute_ddl(
        self,
        sql: str,
        *,
        db: str | None = None,
        shard_key: str | None = None,
        partitions: int = ddl.DEFAULT_PARTITIONS,
        broadcast: bool = False,
    ) -> int | None:
        return await ddl.execute_ddl(
            self.ctx,
            self.store,
            sql,
            default_db=db,
            shard_key=shard_key,
            partitions=partitions,
            broadcast=broadcast,
        )

    async def add_dn(self, dn_id: int) -> scale_out.ScaleOutResult:
        return await scale_out.add_dn(self.ctx, self.store, dn_id)

    async def recover(self, wait_s: float = 5.0) -> RecoveryReport:
        return await recovery.recover_until_settled(self.ctx, wait_s)

    async def purge_commit_records(self, older_than_s: float) -> int:
        return await purge_commit_records(self.ctx, older_than_s)
