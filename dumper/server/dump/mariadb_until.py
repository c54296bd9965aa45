"""`START SLAVE UNTIL master_gtid_pos = '…'` of a MariaDB replica in GTID mode. The replica
does not stop by itself: it sets `@slave_until_gtid` before its dump, and MariaDB's master
sends the transactions up to and including that GTID, then a fake GTID_LIST event flagged
UNTIL_REACHED, and ends the dump (sql_repl.cc, `is_until_reached`); the replica's I/O thread
stops on that flag, its SQL thread when it gets there.

Our domain is one gapless sequence, so the until GTID of our domain is a seq_no: the dump
ends where that transaction ends (before the next GTID event, or after the transaction's CTS
mark), found as the sender gets there: its GTID event by its bytes (`MariadbGtids.locate`,
searching only what was not searched yet), then its end by a walk of its events. A replica
already at or past it gets the flagged event at once (as MariaDB, which removes a reached
domain from the until state before sending anything). An until position without our domain
is reached at once too: nothing we send can reach it."""

from __future__ import annotations

import mmap
from pathlib import Path

from binlog_writer import MariadbGtids
from binlog_writer.mariadb_gtids import MARIADB_GTID_EVENT_SIZE
from cdc.binlog.constants import (
    BINLOG_CHECKPOINT_EVENT,
    HEADER_LEN,
    MARIADB_GTID_EVENT,
    EventFlag,
    GtidListFlag,
)
from cdc.binlog.events import DomainGtid, GtidListEvent, encode_event
from cdc.binlog.header import OFF_TYPE, event_size


class GtidUntil:
    """Where one dump with `@slave_until_gtid` ends."""

    __slots__ = ("layout", "until", "reached", "_file", "_searched", "_at", "_end")

    def __init__(self, layout: MariadbGtids, until: DomainGtid | None, reached: bool) -> None:
        self.layout = layout
        self.until = until  # of our domain (None: the position names none)
        self.reached = reached or until is None  # at or past it before the dump starts
        self._file = ""
        self._searched = 0  # `_file` holds no until GTID event before this
        self._at: int | None = None  # the until GTID event's position in `_file`
        self._end: int | None = None  # where its transaction ends, once whole

    def limit(self, name: str, path: Path, pos: int) -> tuple[int | None, bool]:
        """How far a dump at `pos` of file `name` may go: (position, True) = it ends there,
        (position, False) = not past there yet, (None, False) = no bound in this file so far."""
        if self.reached:
            return pos, True
        if name != self._file:
            self._file, self._searched, self._at, self._end = name, pos, None, None
        if self._at is None:
            assert self.until is not None
            self._at = self.layout.locate(path, self.until.seq_no, self._searched)
            if self._at is None:
                # A GTID event being written is not whole yet: search its bytes again.
                self._searched = max(self._searched, path.stat().st_size - MARIADB_GTID_EVENT_SIZE)
                return None, False
        if self._end is None:
            self._end = _transaction_end(path, self._at)
        return (self._at, False) if self._end is None else (self._end, True)

    def final_event(self, server_id: int, log_pos: int, checksum: bool) -> bytes:
        """The fake GTID_LIST that tells the replica its until position is reached."""
        listed = () if self.until is None else (self.until,)
        body = GtidListEvent(listed, flags=int(GtidListFlag.UNTIL_REACHED))
        return encode_event(
            body,
            server_id=server_id,
            log_pos=log_pos,
            flags=int(EventFlag.ARTIFICIAL),
            checksum=checksum,
        )


def _transaction_end(path: Path, at: int) -> int | None:
    """Where the transaction whose GTID event is at `at` ends: at the next GTID event (a
    CREATE TABLE's second GTID), or after its CTS mark; None while it is not whole."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        end = len(m)
        off = at + event_size(m, at)
        while end - off >= HEADER_LEN:
            size = event_size(m, off)
            if size < HEADER_LEN or off + size > end:
                return None
            kind = m[off + OFF_TYPE]
            if kind == MARIADB_GTID_EVENT:
                return off
            if kind == BINLOG_CHECKPOINT_EVENT:  # the CTS mark: a transaction's last event
                return off + size
            off += size
    return None
