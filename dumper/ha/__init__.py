"""HA of the dumper: one leader at a time by a lease in the GMS, followers copying its files,
fencing of a leader whose lease ran out, and the timeline of a takeover."""

from dumper.ha.deps import DnLeaders, GmsLeaseStore, LeaderBuilder, LeaseStore
from dumper.ha.ha_node import HaNode
from dumper.ha.state import FencedError
from dumper.ha.status import ha_status
from dumper.ha.takeover import TakeoverTimeline

__all__ = [
    "DnLeaders",
    "FencedError",
    "GmsLeaseStore",
    "HaNode",
    "LeaderBuilder",
    "LeaseStore",
    "TakeoverTimeline",
    "ha_status",
]
