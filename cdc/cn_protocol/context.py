"""What every operation of the protocol needs, built once and passed in (no singletons)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Protocol

from cdc.cn_protocol.dn_pool import DnPools
from cdc.cn_protocol.ground_truth import GroundTruthLog
from cdc.cn_protocol.record_batch import CommitRecords
from cdc.cn_protocol.tso import TsoOracle
from cdc.config import Config


class CrashHook(Protocol):
    """Called at each named step of the commit protocol (commit_protocol.py: "after_prepare",
    "after_tso", ...). Production writers pass none; the kill tests pass one that SIGKILLs the
    process at a chosen step (`cdc_equipment.crash_points.CrashPoints`)."""

    def reached(self, step: str) -> None: ...


class NoCrash:
    """The hook that does nothing: every writer but the kill tests'."""

    def reached(self, step: str) -> None:
        pass


class StorageView(Protocol):
    """What the protocol reads of a catalogue: the storage DNs, in join order (private
    statements run on each, in this order). The reference CN's `Catalogue` is one."""

    dns: list[int]


@dataclass(slots=True)
class StorageDns:
    """A catalogue of storage DNs only: what a writer of heartbeats and markers needs."""

    dns: list[int]


@dataclass(slots=True)
class ProtocolContext:
    config: Config
    pools: DnPools
    tso: TsoOracle
    catalogue: StorageView
    instance_id: int
    records: CommitRecords
    crash: CrashHook = field(default_factory=NoCrash)
    ground_truth: GroundTruthLog = field(default_factory=lambda: GroundTruthLog(None))
    _txn_seq: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def server_id(self) -> int:
        return self.config.cn.server_id

    def next_txn_id(self) -> int:
        """Unique across CN processes and restarts: the GMS-assigned instance id, then a counter."""
        return (self.instance_id << 32) | next(self._txn_seq)
