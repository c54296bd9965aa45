"""history: the global binlog read as the cluster's history. Points of it named by TSO, time,
GTID or file:pos and resolved to a transaction boundary (`points`), and flashback: the inverse
of a range's changes as SQL, as a binlog file, or applied through a CN (docs/flashback.md)."""

from .flashback import Conflict, FlashbackError, Plan, chosen, plan
from .flashback_apply import Applied, apply
from .flashback_binlog import binlog_bytes, write_binlog
from .flashback_sql import script
from .points import (
    AmbiguousPoint,
    MalformedPoint,
    Point,
    PointBeforeOldest,
    PointError,
    PointInFuture,
    PointInsideTransaction,
    PointNotFound,
    PointSpec,
    RetainedFiles,
    parse_point,
    resolve,
)
from .remote import copy_served

__all__ = [
    "AmbiguousPoint",
    "Applied",
    "Conflict",
    "FlashbackError",
    "MalformedPoint",
    "Plan",
    "Point",
    "PointBeforeOldest",
    "PointError",
    "PointInFuture",
    "PointInsideTransaction",
    "PointNotFound",
    "PointSpec",
    "RetainedFiles",
    "apply",
    "binlog_bytes",
    "chosen",
    "copy_served",
    "parse_point",
    "plan",
    "resolve",
    "script",
    "write_binlog",
]
