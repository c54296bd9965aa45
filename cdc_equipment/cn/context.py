"""What every CN operation needs, built once by ComputeNode and passed in (no singletons): the
protocol's context (cdc/cn_protocol) with the whole catalogue and the partition gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc.cn_protocol.catalogue import Catalogue
from cdc.cn_protocol.context import ProtocolContext
from cdc_equipment.cn.partition_gate import PartitionGate

if TYPE_CHECKING:
    from cdc_equipment.cn.membership import Membership


@dataclass(slots=True)
class CnContext(ProtocolContext):
    catalogue: Catalogue
    gate: PartitionGate = field(default_factory=PartitionGate)
    # This process among the CN processes (set once started): catalogue versions, freezes.
    membership: Membership | None = None
