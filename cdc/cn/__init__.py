"""Reference compute node (CN): TSO, catalogue, routing and the XA commit protocol that every
writer to the cluster follows so that a global binlog can be built from the DN binlogs.

Exports `ComputeNode` (built from `Config`), `Transaction`, `init` (`cdc cn init`) and errors.
They are imported on first use: the MergeSource processes read only `cdc.cn.schema` and
`cdc.cn.xid` (the CN's published contract), and importing the whole CN (pymysql, the
router, ...) cost each of them ~0.2-0.4 s of CPU at start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc.cn.bootstrap import InitResult, init
    from cdc.cn.errors import (
        CatalogueError,
        CnError,
        CommitOutcomeUnknown,
        NotInitialisedError,
        RoutingError,
        TransactionAborted,
        TsoError,
    )
    from cdc.cn.node import ComputeNode
    from cdc.cn.recovery import RecoveryReport
    from cdc.cn.transaction import Result, Transaction

_EXPORTS = {
    "CatalogueError": "cdc.cn.errors",
    "CnError": "cdc.cn.errors",
    "CommitOutcomeUnknown": "cdc.cn.errors",
    "ComputeNode": "cdc.cn.node",
    "InitResult": "cdc.cn.bootstrap",
    "NotInitialisedError": "cdc.cn.errors",
    "RecoveryReport": "cdc.cn.recovery",
    "Result": "cdc.cn.transaction",
    "RoutingError": "cdc.cn.errors",
    "Transaction": "cdc.cn.transaction",
    "TransactionAborted": "cdc.cn.errors",
    "TsoError": "cdc.cn.errors",
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
    "init",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cdc.cn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # next time a plain attribute
    return value
