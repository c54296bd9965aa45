"""Reference compute node (CN): TSO, catalogue, routing and the XA commit protocol that every
writer to the cluster follows so that a global binlog can be built from the DN binlogs.

Exports `ComputeNode` (built from `Config`), `Transaction`, `init` (`cdc cn init`) and errors.
"""

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
