"""GTID numbering of the global binlog: the writer gives each transaction the next gno as it
lands, and reads the last one back from the files when it opens. Two layouts share this
machinery (`GtidLayout`): MySQL's (`MysqlGtids`, here) and MariaDB's (`MariadbGtids`,
`mariadb_gtids.py`); the writer only sees the layout's `stamp`, `last` and `header_event`.

The number is a function of the stream, never of a process: transaction n of the stream is
`sid:n` whichever dumper wrote it, because a writer (a restarted one, or an HA follower that
took over its copy) continues from the last GTID in its files, and copies are cut back only
to transaction boundaries. Every file's PREVIOUS_GTIDS is `sid:1-k`, k the last gno before it.

Each transaction starts with a GTID event in the 5.7 layout (`cdc.binlog.gtid`), written by
the encoder with zeros where the sid, the gno and the logical clock go; `stamp` fills them.
The logical clock says "serial": last_committed = gno - 1, sequence_number = gno (the global
binlog is one ordered stream; a replica that applies in parallel by it gets no wrong order).
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cdc.binlog.constants import GTID_EVENT, HEADER_LEN, PREVIOUS_GTIDS_EVENT
from cdc.binlog.errors import CodecError
from cdc.binlog.events import ROWS_QUERY_MARK, MarkCarrier, PreviousGtidsEvent
from cdc.binlog.fde import FormatDescription, mysql57_fde
from cdc.binlog.gtid import (
    GTID_BODY_LEN,
    GTID_GNO_OFFSET,
    GTID_SID_OFFSET,
    LT_TYPE_LOGICAL,
    GtidSet,
    uuid_text,
)
from cdc.binlog.header import event_size, log_pos

GTID_EVENT_SIZE = HEADER_LEN + GTID_BODY_LEN + 4
# sid, gno, lt_type, last_committed, sequence_number: the GTID body after its flags byte.
_FIELDS = struct.Struct("<16sQBQQ")
_U32 = struct.Struct("<I")


class GtidLayout(Protocol):
    """One GTID layout of the global binlog: which event starts each transaction, how the
    writer numbers it, what each file starts with, and how the last number is read back."""

    flavor: str
    event_type: int  # the GTID event every transaction starts with
    # Whether a file's GTIDs all carry its FDE's server_id (the writer starts a new file when
    # its own differs from the newest file's).
    server_id_per_file: bool
    # The event that carries the CTS mark ending every transaction (`cdc.binlog.events`).
    mark: MarkCarrier

    def fde(self, server_version: str) -> FormatDescription: ...

    def header_event(self, previous: Path | None, gno: int) -> object:
        """The event after the FDE of a new file (codec body): the GTIDs before it. `previous`
        is the file before it (None: the first), `gno` the last number written."""

    def stamp(self, buf: bytearray, offsets, gno: int) -> int:
        """Number the GTID events at `offsets` gno + 1, …; returns the last given."""

    def last(self, path: Path, end: int) -> int | None:
        """The last number in the file before `end` (its header's when it has no GTID event);
        None if the file has no complete header."""


class MysqlGtids:
    """MySQL 5.7 GTID events `sid:gno` (type 33) and PREVIOUS_GTIDS, in 5.7-flavoured files."""

    flavor = "mysql"
    event_type = GTID_EVENT
    server_id_per_file = False
    mark = ROWS_QUERY_MARK

    def __init__(self, sid: bytes) -> None:
        self.sid = sid

    def fde(self, server_version: str) -> FormatDescription:
        return mysql57_fde(server_version)

    def header_event(self, previous: Path | None, gno: int) -> PreviousGtidsEvent:
        return PreviousGtidsEvent(GtidSet.upto(self.sid, gno).sids())

    def stamp(self, buf: bytearray, offsets, gno: int) -> int:
        return stamp(buf, offsets, self.sid, gno)

    def last(self, path: Path, end: int) -> int | None:
        return last_gno(path, end, self.sid)


def stamp(buf: bytearray, offsets, sid: bytes, gno: int) -> int:
    """Number the GTID events at `offsets` of `buf` gno + 1, gno + 2, … (their log_pos and CRC
    are stamped afterwards). Returns the last gno given."""
    pack = _FIELDS.pack_into
    for at in offsets:  # the leader's path: once per transaction, so no call it can spare
        if buf[at + 4] != GTID_EVENT or buf[at + 9] != GTID_EVENT_SIZE:
            raise ValueError(
                f"no GTID event at offset {at} (event type {buf[at + 4]}): every transaction "
                "of a GTID-numbered binlog starts with one"
            )
        gno += 1
        pack(buf, at + GTID_SID_OFFSET, sid, gno, LT_TYPE_LOGICAL, gno - 1, gno)
    return gno


def find(buf, start: int, end: int, event_type: int = GTID_EVENT) -> list[int]:
    """Offsets of the GTID events (of `event_type`) among the whole events in `buf[start:end]`
    (walks their headers: for a single transaction or a stream's part; a batch brings its
    offsets)."""
    found = []
    at = start
    while at < end:
        if buf[at + 4] == event_type:
            found.append(at)
        at += event_size(buf, at)
    return found


def last_gno(path: Path, end: int, sid: bytes) -> int | None:
    """The gno of the last GTID event of `sid` in the file before `end`; else the last of the
    file's PREVIOUS_GTIDS; None if the file has no complete header.

    Found from the end: the sid's bytes searched backwards in C (`rfind`), each hit checked
    as a whole GTID event (type, size, log_pos, CRC), so a cost of about the last
    transaction, not of the file."""
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        header = previous_gtids(m)
        if header is None:
            return None
        header_end, before = header
        foreign = [s for s, _ in before.sids() if s != sid]
        if foreign:
            raise CodecError(
                f"{path.name} continues GTIDs of server_uuid {uuid_text(foreign[0])}, but this "
                f"global binlog's server_uuid is {uuid_text(sid)} (cdc_meta."
                "binlog_server_identity): these files belong to another cluster",
                file=str(path),
            )
        hit = m.rfind(sid, header_end, min(end, size))
        while hit >= 0:
            at = hit - GTID_SID_OFFSET
            if at >= header_end and _is_gtid_event(m, at):
                return int.from_bytes(m[hit + 16 : hit + 24], "little")
            hit = m.rfind(sid, header_end, hit + 15)
        return before.last(sid)


def previous_gtids(buf) -> tuple[int, GtidSet] | None:
    """(end of the header, the set in its PREVIOUS_GTIDS) of a file's bytes; an empty set for
    a header without one; None if the header is incomplete."""
    fde_at = 4
    if len(buf) < fde_at + HEADER_LEN:
        return None
    fde_end = fde_at + event_size(buf, fde_at)
    if len(buf) < fde_end:
        return None
    if len(buf) < fde_end + HEADER_LEN or buf[fde_end + 4] != PREVIOUS_GTIDS_EVENT:
        return fde_end, GtidSet()
    end = fde_end + event_size(buf, fde_end)
    if len(buf) < end:
        return None
    return end, GtidSet.decode(bytes(buf[fde_end + HEADER_LEN : end - 4]))


def _is_gtid_event(m, at: int) -> bool:
    return is_whole_event(m, at, GTID_EVENT, GTID_EVENT_SIZE)


def is_whole_event(m, at: int, event_type: int, size: int) -> bool:
    """Whether a whole event of this type and size, with its log_pos and CRC right, starts at
    `at` (a hit of a byte search is checked this way before it is believed)."""
    if at < 4 or at + HEADER_LEN > len(m) or m[at + 4] != event_type or event_size(m, at) != size:
        return False
    end = at + size
    if log_pos(m, at) != end or end > len(m):
        return False
    return zlib.crc32(m[at : end - 4]) == _U32.unpack_from(m, end - 4)[0]


def gno_at(buf, at: int) -> int:
    """The gno of the GTID event starting at `at`."""
    return int.from_bytes(buf[at + GTID_GNO_OFFSET : at + GTID_GNO_OFFSET + 8], "little")


def locate(path: Path, sid: bytes, gno: int) -> int | None:
    """Where the GTID event `sid:gno` starts in the file, or None (sid and gno side by side
    in its body)."""
    return find_event(path, sid + gno.to_bytes(8, "little"), GTID_SID_OFFSET, _is_gtid_event)


def find_event(
    path: Path,
    needle: bytes,
    offset: int,
    is_event: Callable[[mmap.mmap, int], bool],
    start: int = 0,
) -> int | None:
    """Where the first event at or after `start` whose bytes hold `needle` at `offset` starts,
    or None: found by a byte search in C, each hit checked by `is_event(m, at)` (a whole
    event of the wanted kind) before it is believed."""
    if path.stat().st_size == 0:
        return None
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        hit = m.find(needle, start + offset)
        while hit >= 0:
            if is_event(m, hit - offset):
                return hit - offset
            hit = m.find(needle, hit + 1)
    return None


def file_previous_gtids(path: Path) -> GtidSet:
    """The PREVIOUS_GTIDS set of a file (empty if it has none or its header is incomplete)."""
    with open(path, "rb") as f:
        head = f.read(64 * 1024)
    found = previous_gtids(head)
    if found is None or found[0] > len(head):  # a huge set: read the whole header
        found = previous_gtids(path.read_bytes())
    return GtidSet() if found is None else found[1]
