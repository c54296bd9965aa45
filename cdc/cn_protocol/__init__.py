"""The CN protocol: what a compute node (any sharding layer writing to the DNs) must write for the
CDC to build a global binlog from the DN binlogs, and the code that writes it.

**Every transaction is an XA transaction with a commit TSO**, single-DN ones included (an
`XA COMMIT ... ONE PHASE` or a local commit leaves no TSO in the binlog, so it cannot be placed
in the global order):
1. `XA START` on each DN it touches, with xid gtrid `cdc-<txn_id>`, bqual `<dn_id>`, formatID 1
   (`xid.py`; `txn_id = instance_id << 32 | n`, `instance_id` registered in the GMS per process
   start, so ids never repeat). Every statement starts with the TraceId hint
   `/*CDC trace=<seq>.<subseq> cn=<server_id> */` (`transaction.trace_hint`): MariaDB keeps it
   in the ANNOTATE_ROWS event, and the MergeSource orders a transaction's statements by it.
2. `XA END` + `XA PREPARE` on every branch.
3. Only then the commit TSO (`tso.py`: `physical_ms << 22 | logical`, one row in the GMS, so any
   TSO fetched after another was returned is larger).
4. The commit record `__cdc__.__cdc_tx_log__(txn_id, commit_tso, participants)` on the primary
   (the first DN that changed rows), autocommit, from another session: this row is the commit
   decision; then on every other participant (an upsert: it overwrites a recovery tombstone).
   A DN's MergeSource releases a branch once its record is in that DN's binlog.
5. `XA COMMIT` on every branch, never on a DN before its record is written.
(`commit_protocol.py`, `branch.py`, `transaction.PrivateTransaction`.)

**Private tables** (`schema.py`, database `__cdc__` on every storage DN): `__cdc_tx_log__`
(commit records; `aborted = 1` is a recovery tombstone), `__cdc_heartbeat__`,
`__cdc_instruction__` (markers CdcStart, StorageChange, MetaChange, FlushLogs) and
`__cdc_ddl_record__` (logical DDL). The MergeSource decodes these rows from the binlogs: their
definitions change only together with it.

**Heartbeats** (`heartbeat.py`): a transaction of the protocol upserting the writer's row of
`__cdc_heartbeat__` on every storage DN, every `[cn] heartbeat_interval_ms`: the global binlog
only advances to a TSO once every DN has shown one above it. **Markers** (`markers.py`):
instructions and DDL records, transactions of the protocol on every storage DN, so every DN
sees each at the same TSO. **Recovery** (`recovery.py`): a prepared branch is committed, with its
record's TSO, iff its primary holds a commit record; otherwise recovery writes tombstones
everywhere first and rolls back. Old records are purged (`purge.py`), never those in doubt.

**The catalogue** (`catalogue.py`, rows in the GMS: `catalogue_store.py`): the logical tables,
the placement of each partition on a DN, physical names (`bank.accounts` partition 3 is
`bank_p.accounts_p0003`) and the shard hash; the markers' topology maps are made from it.
A tool that writes through a CN (the backfill's watermarks) gets one as a `CnConnector`
(`client.py`).

`ProtocolNode` (`protocol_node.py`) writes heartbeats and markers and runs recovery on the
storage DNs the GMS lists (`gms.py`): the Dumper runs one, so the writer (`transaction.py`,
`commit_protocol.py`, `branch.py`, `record_batch.py`, `dn_conn.py`) is part of the contract. The
reference CN (`cdc_equipment/cn/`) builds user transactions, routing and DDL on top of this
package; no runtime stage imports `cdc_equipment`.

Names are imported on first use: MergeSource processes read only `schema` and `xid`, and the
rest imports the DN client libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "CnError",
    "CommitOutcomeUnknown",
    "PrivateTransaction",
    "ProtocolContext",
    "ProtocolNode",
    "RecoveryReport",
    "StorageDns",
    "TransactionAborted",
    "TsoError",
    "Xid",
    "trace_hint",
]

if TYPE_CHECKING:
    from cdc.cn_protocol.context import ProtocolContext, StorageDns
    from cdc.cn_protocol.errors import CnError, CommitOutcomeUnknown, TransactionAborted, TsoError
    from cdc.cn_protocol.protocol_node import ProtocolNode
    from cdc.cn_protocol.recovery import RecoveryReport
    from cdc.cn_protocol.transaction import PrivateTransaction, trace_hint
    from cdc.cn_protocol.xid import Xid

_EXPORTS = {
    "CnError": "cdc.cn_protocol.errors",
    "CommitOutcomeUnknown": "cdc.cn_protocol.errors",
    "PrivateTransaction": "cdc.cn_protocol.transaction",
    "ProtocolContext": "cdc.cn_protocol.context",
    "ProtocolNode": "cdc.cn_protocol.protocol_node",
    "RecoveryReport": "cdc.cn_protocol.recovery",
    "StorageDns": "cdc.cn_protocol.context",
    "TransactionAborted": "cdc.cn_protocol.errors",
    "TsoError": "cdc.cn_protocol.errors",
    "Xid": "cdc.cn_protocol.xid",
    "trace_hint": "cdc.cn_protocol.transaction",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cdc.cn_protocol' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # next time a plain attribute
    return value
