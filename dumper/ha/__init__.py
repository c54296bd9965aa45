"""HA of the dumper: one leader at a time by a lease in the GMS, followers copying its files,
fencing of a leader whose lease ran out, and the timeline of a takeover."""

from dumper.ha.node import FencedError, HaNode, ha_status
from dumper.ha.takeover import TakeoverTimeline

__all__ = ["FencedError", "HaNode", "TakeoverTimeline", "ha_status"]
