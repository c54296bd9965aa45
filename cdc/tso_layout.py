"""The TSO's bit layout, `physical_ms << 22 | logical`: the one conversion between a TSO and
the wall-clock milliseconds it was taken at (lags, purge horizons, the metrics' seconds).

Apart from `cdc/cn_protocol/tso.py`, which allocates TSOs in the GMS, so that a reader of TSOs
(the dumper's status and metrics) imports no database client for a shift.
"""

from __future__ import annotations

LOGICAL_BITS = 22
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1


def compose(physical_ms: int, logical: int = 0) -> int:
    return (physical_ms << LOGICAL_BITS) | logical


def physical_ms(tso: int) -> int:
    """The wall-clock milliseconds (Unix epoch) at which `tso` was taken."""
    return tso >> LOGICAL_BITS


def logical(tso: int) -> int:
    return tso & LOGICAL_MASK
