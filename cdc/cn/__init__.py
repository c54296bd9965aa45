"""Reference compute node (CN): TSO, catalogue, routing and the XA commit protocol that every
writer to the cluster follows so that a global binlog can be built from the DN binlogs.

The protocol itself (private tables, xid and commit-record formats, heartbeats, markers, XA
recovery) is `cdc.cn_protocol`, which the pipeline uses; this package adds the reference CN's
catalogue, routing, DDL and scale-out for tests, the demo and benchmarks. No runtime stage
imports it.

Exports `ComputeNode` (built from `Config`), `connect` (a short-lived CN for a tool), `Transaction`,
`init` (`cdc cn init`) and errors,
imported on first use (importing the whole CN: pymysql, the router, ... costs ~0.2-0.4 s of
CPU).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc.cn.bootstrap import InitResult, init
    from cdc.cn.node import ComputeNode, connect
    from cdc.cn.transaction import Result, Transaction
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

_EXPORTS = {
    "CatalogueError": "cdc.cn_protocol.errors",
    "CnError": "cdc.cn_protocol.errors",
    "CommitOutcomeUnknown": "cdc.cn_protocol.errors",
    "ComputeNode": "cdc.cn.node",
    "InitResult": "cdc.cn.bootstrap",
    "NotInitialisedError": "cdc.cn_protocol.errors",
    "RecoveryReport": "cdc.cn_protocol.recovery",
    "Result": "cdc.cn.transaction",
    "RoutingError": "cdc.cn_protocol.errors",
    "Transaction": "cdc.cn.transaction",
    "TransactionAborted": "cdc.cn_protocol.errors",
    "TsoError": "cdc.cn_protocol.errors",
    "connect": "cdc.cn.node",
    "init": "cdc.cn.bootstrap",
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
        raise AttributeError(f"module 'cdc.cn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # next time a plain attribute
    return value
