"""The reference compute node (CN): a sharding layer that writes to the DNs by the CN protocol
(`cdc.cn_protocol`), equipment for tests, the demo and benches; no runtime stage imports it.

The protocol itself (private tables, xid and commit-record formats, heartbeats, markers, XA
recovery) is `cdc.cn_protocol`, which the pipeline uses; this package adds the reference CN's
catalogue, routing, user transactions, DDL, scale-out, several CN processes (`membership.py`),
cluster changes as jobs in the GMS (`jobs.py`) and the workloads (`workloads/`).

Exports `ComputeNode` (built from `Config`), `connect` (a short-lived CN for a tool), `Transaction`,
`init` (`cdc cn init`) and errors, imported on first use (importing the whole CN: pymysql, the
router, ... costs ~0.2-0.4 s of CPU).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc.cn_protocol.errors import (
        CatalogueError,
        CnError,
        CommitOutcomeUnknown,
        NotInitialisedError,
        RoutingError,
        TransactionAborted,
        TsoError,
    )
    from cdc.cn_protocol.recovery import RecoveryReport
    from cdc_equipment.cn.bootstrap import InitResult, init
    from cdc_equipment.cn.compute_node import ComputeNode, connect
    from cdc_equipment.cn.transaction import Result, Transaction

_EXPORTS = {
    "CatalogueError": "cdc.cn_protocol.errors",
    "CnError": "cdc.cn_protocol.errors",
    "CommitOutcomeUnknown": "cdc.cn_protocol.errors",
    "ComputeNode": "cdc_equipment.cn.compute_node",
    "InitResult": "cdc_equipment.cn.bootstrap",
    "NotInitialisedError": "cdc.cn_protocol.errors",
    "RecoveryReport": "cdc.cn_protocol.recovery",
    "Result": "cdc_equipment.cn.transaction",
    "RoutingError": "cdc.cn_protocol.errors",
    "Transaction": "cdc_equipment.cn.transaction",
    "TransactionAborted": "cdc.cn_protocol.errors",
    "TsoError": "cdc.cn_protocol.errors",
    "connect": "cdc_equipment.cn.compute_node",
    "init": "cdc_equipment.cn.bootstrap",
}

__all__ = [
    "CatalogueError",
    "CnError",
    "CommitOutcomeUnknown",
    "ComputeNode",
    "InitResult",
    "NotInitialisedError",
    "RecoveryReport",
    "Result",
    "RoutingError",
    "Transaction",
    "TransactionAborted",
    "TsoError",
    "connect",
    "init",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cdc_equipment.cn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # next time a plain attribute
    return value
