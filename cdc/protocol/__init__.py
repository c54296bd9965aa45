"""MySQL client/server protocol primitives shared by the DN dump client and the Dumper server:
framing, encodings, authentication scrambles, capability flags, a small asyncio client, and the
replication dump client (`DumpClient`: COM_BINLOG_DUMP with reconnect-and-resume, raw events out)
that the MergeSource, an HA follower and the backfill read binlogs with.

The dump client's names are exported here, imported on first use: the Dumper's server process
needs only the primitives.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cdc.protocol.dump_client import (
        BinlogPosition,
        DnEvent,
        DumpClient,
        DumpError,
        DumpSettings,
        event_pos,
    )

__all__ = ["BinlogPosition", "DnEvent", "DumpClient", "DumpError", "DumpSettings", "event_pos"]
_DUMP_CLIENT = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name not in _DUMP_CLIENT:
        raise AttributeError(f"module 'cdc.protocol' has no attribute {name!r}")
    value = getattr(importlib.import_module("cdc.protocol.dump_client"), name)
    globals()[name] = value
    return value
