"""What every CN operation needs, built once by ComputeNode and passed in (no singletons)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from cdc.cn.catalogue import Catalogue
from cdc.cn.crash_points import CrashPoints
from cdc.cn.dn_pool import DnPools
from cdc.cn.ground_truth import GroundTruthLog
from cdc.cn.partition_gate import PartitionGate
from cdc.cn.record_batch import CommitRecords
from cdc.cn.tso import TsoOracle
from cdc.config import Config


@dataclass(slots=True)
class CnContext:
    config: Config
    pools: DnPools
    tso: TsoOracle
    catalogue: Catalogue
    instance_id: int
    records: CommitRecords
    crash: CrashPoints = field(default_factory=CrashPoints)
    ground_truth: GroundTruthLog = field(default_factory=lambda: GroundTruthLog(None))
    gate: PartitionGate = field(default_factory=PartitionGate)
    _txn_seq: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def server_id(self) -> int:
        return self.config.cn.server_id

    @property
    def catalog_db(self) -> str:
        return self.config.cn.catalog_database

    def next_txn_id(self) -> int:
        """Unique across CN processes and restarts: the GMS-assigned instance id, then a counter."""
        return (self.instance_id << 32) | next(self._txn_seq)
