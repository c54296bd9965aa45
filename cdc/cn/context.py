"""What every CN operation needs, built once by ComputeNode and passed in (no singletons): the
protocol's context (cdc/cn_protocol) with the whole catalogue and the partition gate."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.cn.partition_gate import PartitionGate
from cdc.cn_protocol.catalogue import Catalogue
from cdc.cn_protocol.context import ProtocolContext


@dataclass(slots=True)
class CnContext(ProtocolContext):
    catalogue: Catalogue
    gate: PartitionGate = field(default_factory=PartitionGate)
