"""A GTID dump whose client set has gaps: the transactions of the set after the first gap are
not sent again (MySQL's `Binlog_sender::skip_event`). The dump starts at the first GTID the
client lacks (`gtid_state`); from there each GTID event of ours opens a group that is dropped,
up to the next GTID event, when the client has that GTID. ROTATE is never dropped (the client
follows files by it), and a file starts outside any group, as in MySQL, where a transaction
never spans files. Once past the client's last GTID nothing more can be dropped: the dump goes
back to the shared, compiled path (`binlog_sender`).

A client of one global binlog rarely has gaps (a replica that skipped transactions by hand, a
set merged from several sources); without this it would get those transactions twice."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from binlog_writer.gtids import gno_at
from cdc.binlog.constants import GTID_EVENT, HEADER_LEN, ROTATE_EVENT
from cdc.binlog.gtid import GTID_GNO_OFFSET, GTID_SID_OFFSET, MAX_GNO, GtidSet
from cdc.binlog.header import OFF_TYPE, event_size
from cdc.protocol.packets import MAX_CHUNK

_SID_END = GTID_SID_OFFSET + 16
_LARGEST = MAX_CHUNK - 2  # bigger events go out split (`BinlogSender._send_unusual`), alone


@dataclass(slots=True, frozen=True)
class ExcludedGtids:
    """The GTIDs of ours a client holds after its first gap: half-open, sorted intervals."""

    sid: bytes
    intervals: tuple[tuple[int, int], ...]

    @classmethod
    def after_prefix(cls, client: GtidSet, sid: bytes) -> ExcludedGtids | None:
        """What `client` holds of `sid` beyond its `sid:1-k` prefix (None: nothing)."""
        have = client.prefix_end(sid)
        ivs = tuple(iv for iv in client.intervals(sid) if iv[0] > have + 1)
        return cls(sid, ivs) if ivs else None

    @property
    def last(self) -> int:
        return self.intervals[-1][1] - 1

    def __contains__(self, gno: int) -> bool:
        # A bisection: a client may send a set of a million intervals (one packet).
        i = bisect_right(self.intervals, (gno, MAX_GNO + 1)) - 1
        return i >= 0 and gno < self.intervals[i][1]


class GtidSkip:
    """One dump's walk through the excluded groups."""

    __slots__ = ("excluded", "skipping", "done")

    def __init__(self, excluded: ExcludedGtids) -> None:
        self.excluded = excluded
        self.skipping = False  # inside a group the client has
        self.done = False  # past the client's last GTID: nothing left to drop

    def new_file(self) -> None:
        self.skipping = False

    def filter(self, data: bytes) -> tuple[bytes, int]:
        """(the events to send, how many bytes of `data` they stand for) for the whole events
        at the start of `data`. Stops at a partial event, at one a packet cannot hold, and
        before the first GTID past the client's last (then `done`)."""
        keep: list[bytes] = []
        off, end = 0, len(data)
        excluded = self.excluded
        while end - off >= HEADER_LEN:
            size = event_size(data, off)
            if size < HEADER_LEN or size > _LARGEST or off + size > end:
                break
            kind = data[off + OFF_TYPE]
            if kind == GTID_EVENT and size >= GTID_GNO_OFFSET + 8:
                gno = gno_at(data, off)
                if gno > excluded.last:
                    self.done = True
                    break
                sid = data[off + GTID_SID_OFFSET : off + _SID_END]
                self.skipping = sid == excluded.sid and gno in excluded
            if kind == ROTATE_EVENT or not self.skipping:
                keep.append(data[off : off + size])
            off += size
        return b"".join(keep), off

    def drops(self, event: bytes) -> bool:
        """Is `event`, one `filter` does not take (a packet cannot hold it), dropped? It is
        never a GTID or ROTATE event, so it belongs to the group the walk is in."""
        return self.skipping and event[OFF_TYPE] not in (GTID_EVENT, ROTATE_EVENT)
