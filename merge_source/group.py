"""Cut one DN's event stream into binlog groups (one GTID-started transaction each).

MariaDB writes every group as GTID … terminator: XID for a normal transaction, XA_PREPARE for an
XA prepare, the first QUERY for a standalone group (DDL, XA COMMIT/ROLLBACK). Events outside a
group (FDE, ROTATE, GTID_LIST, BINLOG_CHECKPOINT, STOP) carry no data and are skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from cdc.binlog.constants import EventType
from merge_source.dump_client import DnEvent

log = logging.getLogger(__name__)

GTID = int(EventType.MARIADB_GTID)
XID = int(EventType.XID)
XA_PREPARE = int(EventType.XA_PREPARE)
QUERY = int(EventType.QUERY)
# Offsets in a raw MariaDB GTID event: 19-byte header, then seq_no u64, domain u32, flags2 u8.
GTID_FLAGS2_OFFSET = 19 + 12
FL_STANDALONE = 0x01
QUERY_HEADER_LEN = 13  # post-header of QUERY_EVENT on MariaDB and MySQL


@dataclass(slots=True)
class BinlogGroup:
    """The events of one binlog group, GTID first, terminator last."""

    events: list[DnEvent] = field(default_factory=list)

    @property
    def file(self) -> str:
        return self.events[0].file

    @property
    def start(self) -> int:
        return self.events[0].pos

    @property
    def end(self) -> int:
        return self.events[-1].end

    @property
    def gtid(self) -> DnEvent:
        return self.events[0]

    @property
    def flags2(self) -> int:
        return self.events[0].data[GTID_FLAGS2_OFFSET]


def query_text(event: DnEvent, checksum_len: int = 4) -> bytes:
    """The statement of a QUERY event (status vars and db skipped), without decoding it."""
    data = event.data
    db_len = data[19 + 8]
    status_len = int.from_bytes(data[19 + 11 : 19 + 13], "little")
    start = 19 + QUERY_HEADER_LEN + status_len + db_len + 1
    return bytes(data[start : len(data) - checksum_len])


def ends_group(event: DnEvent, standalone: bool) -> bool:
    code = event.data[4]
    if code == XID or code == XA_PREPARE:
        return True
    if code == QUERY:
        if standalone:
            return True
        text = query_text(event)[:12].upper()
        return (
            text.startswith(b"COMMIT")
            or text.startswith(b"XA COMMIT")
            or text.startswith(b"XA ROLLBACK")
        )
    return False


class GroupAssembler:
    """Feed events in binlog order; complete groups come out."""

    def __init__(self, dn_name: str = "dn"):
        self.dn_name = dn_name
        self._current: BinlogGroup | None = None
        self._standalone = False
        self.dropped_partial = 0

    @property
    def open_group_start(self) -> tuple[str, int] | None:
        """Where the group being assembled starts: a restart must re-read from there."""
        if self._current is None:
            return None
        return self._current.file, self._current.start

    def feed(self, event: DnEvent) -> BinlogGroup | None:
        code = event.data[4]
        if code == GTID:
            if self._current is not None:
                # Only a crashed DN leaves a group without terminator; MariaDB's recovery then
                # truncates it from the binlog and rolls it back in the engine.
                log.warning(
                    "%s: group at %s:%d has no terminator; dropped (DN crash?)",
                    self.dn_name,
                    self._current.file,
                    self._current.start,
                )
                self.dropped_partial += 1
            self._current = BinlogGroup([event])
            self._standalone = bool(event.data[GTID_FLAGS2_OFFSET] & FL_STANDALONE)
            return None
        if self._current is None:
            return None
        self._current.events.append(event)
        if ends_group(event, self._standalone):
            group, self._current = self._current, None
            return group
        return None
