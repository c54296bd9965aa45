"""ProtocolNode: a writer of the protocol's own transactions, built from `Config`: heartbeats,
markers, in-doubt recovery and the purge of old commit records, on the storage DNs the GMS
lists. The Dumper runs one so that the global binlog stays live when no CN sends heartbeats;
the reference CN (`cn.ComputeNode`) is one that also runs user transactions."""

from __future__ import annotations

import logging
from typing import Any

from cdc.cn_protocol import heartbeat, markers, recovery, schema
from cdc.cn_protocol.context import CrashHook, NoCrash, ProtocolContext, StorageDns, StorageView
from cdc.cn_protocol.dn_conn import DnConnection
from cdc.cn_protocol.dn_pool import DnPools, connect
from cdc.cn_protocol.errors import CnError
from cdc.cn_protocol.gms import GmsStore
from cdc.cn_protocol.ground_truth import GroundTruthLog
from cdc.cn_protocol.purge import purge_commit_records
from cdc.cn_protocol.record_batch import CommitRecords
from cdc.cn_protocol.recovery import RecoveryReport
from cdc.cn_protocol.tso import TsoOracle
from cdc.config import Config

log = logging.getLogger(__name__)


class ProtocolNode:
    """`node = ProtocolNode(config); await node.start(); node.start_heartbeat(); ...;
    await node.close()`."""

    def __init__(
        self,
        config: Config,
        *,
        crash_points: CrashHook | None = None,
        pool_size: int = 64,
    ):
        self.config = config
        self._crash = crash_points or NoCrash()
        self.pools = DnPools(config.dn, maxsize=pool_size)
        self.store = self._make_store()
        self.tso = TsoOracle(self._connect_gms, config.cn.catalogue_database)
        self._ctx: ProtocolContext | None = None
        self._heartbeat: heartbeat.Heartbeat | None = None

    def _make_store(self) -> GmsStore:
        return GmsStore(self._connect_gms, self.config.cn.catalogue_database)

    async def _load_catalogue(self) -> StorageView:
        return StorageDns(await self.store.storage_dns())

    def _make_context(self, **fields: Any) -> ProtocolContext:
        return ProtocolContext(**fields)

    async def _connect_gms(self) -> DnConnection:
        return await connect(self.config.gms)

    @property
    def ctx(self) -> ProtocolContext:
        if self._ctx is None:
            raise CnError("the CN is not started: call `await cn.start()` first")
        return self._ctx

    @property
    def instance_id(self) -> int:
        return self.ctx.instance_id

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, *, recover: bool = True, recovery_grace_s: float = 1.0) -> None:
        """Load the catalogue, register this CN instance and settle orphaned XA branches."""
        catalogue = await self._load_catalogue()
        instance_id = await self.store.register_instance(self.config.cn.server_id)
        self._ctx = self._make_context(
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

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -- heartbeats, markers, recovery ---------------------------------------------------------
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

    async def write_instruction(self, type_: str, content: dict[str, Any]) -> int:
        return await markers.write_instruction(self.ctx, type_, content)

    async def flush_logs(self) -> int:
        return await markers.write_instruction(self.ctx, schema.FLUSH_LOGS, {})

    async def recover(self, wait_s: float = 5.0) -> RecoveryReport:
        return await recovery.recover_until_settled(self.ctx, wait_s)

    async def recover_stale(self, grace_s: float) -> RecoveryReport:
        """Settle only what stays prepared over `grace_s` (two scans apart): an in-flight
        commit of a live CN takes milliseconds."""
        return await recovery.recover_at_start(self.ctx, grace_s)

    async def purge_commit_records(self, older_than_s: float) -> int:
        return await purge_commit_records(self.ctx, older_than_s)
