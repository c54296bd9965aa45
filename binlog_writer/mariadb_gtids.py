"""The mariadb flavour's GTID layout (`gtids.GtidLayout`): every transaction starts with a
MariaDB GTID event (162) `domain-server_id-seq_no`, seq_no the same gapless number the MySQL
layout gives (`gtids`: numbered by the writer as it lands, read back from the files at
open), and every file starts with a GTID_LIST (163) holding the binlog state before it: per
server_id of the domain the last GTID, the newest last (what MariaDB's own files carry, and
what a master looks up to find the file a replica's `@slave_connect_state` starts in).

A file's GTID events all carry its FDE's server_id (the writer starts a new file when its
server_id differs from the newest file's), so the last one is found from the end by its
header bytes (type, that server_id, size) in C (`rfind`) and each hit is checked as a whole
event, as for MySQL's sid. The domain is the stream's: files whose GTID_LIST names another
domain are refused ("[dumper] gtid_domain_id changed").
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from typing import NamedTuple

from cdc.binlog.constants import GTID_LIST_EVENT, HEADER_LEN, MARIADB_GTID_EVENT
from cdc.binlog.errors import CodecError
from cdc.binlog.events import CHECKPOINT_MARK, DomainGtid, GtidListEvent
from cdc.binlog.fde import FormatDescription, mariadb_fde
from cdc.binlog.header import event_size
from cdc.binlog.header import server_id as header_server_id
from cdc.binlog.mariadb_gtid import (
    MARIADB_GTID_BODY_LEN,
    MARIADB_GTID_DOMAIN_OFFSET,
    MARIADB_GTID_SEQ_OFFSET,
    position_text,
)

from .gtids import find_event, is_whole_event

MARIADB_GTID_EVENT_SIZE = HEADER_LEN + MARIADB_GTID_BODY_LEN + 4
_SEQ_DOMAIN = struct.Struct("<QI")
_U32 = struct.Struct("<I")
_HEAD_READ = 64 * 1024


class FileHead(NamedTuple):
    """What a file starts with: where its header ends, its server_id, its GTID_LIST."""

    end: int
    server_id: int
    gtid_list: tuple[DomainGtid, ...]


class MariadbGtids:
    """MariaDB GTIDs of domain `domain_id` in 10.11-flavoured files."""

    flavor = "mariadb"
    event_type = MARIADB_GTID_EVENT
    server_id_per_file = True
    # A ROWS_QUERY after a group's end stops a MariaDB replica in GTID mode; a
    # BINLOG_CHECKPOINT is outside any group there (docs/dumper.md, "Flavours").
    mark = CHECKPOINT_MARK

    def __init__(self, domain_id: int, server_id: int) -> None:
        self.domain_id = domain_id
        self.server_id = server_id

    def fde(self, server_version: str) -> FormatDescription:
        return mariadb_fde(server_version)

    def header_event(self, previous: Path | None, gno: int) -> GtidListEvent:
        """The binlog state after `previous`: its GTID_LIST with its own last GTID (its
        server_id's, seq_no `gno`) moved to the end of the domain's entries."""
        entries: list[DomainGtid] = []
        server_id = self.server_id
        if previous is not None and previous.exists():
            head = self.head(previous)
            if head is not None:
                entries, server_id = list(head.gtid_list), head.server_id
        if gno and (not entries or entries[-1].seq_no < gno):
            entries = [e for e in entries if e.server_id != server_id]
            entries.append(DomainGtid(self.domain_id, server_id, gno))
        # MariaDB pads an empty list to 6 body bytes (its readers expect them).
        return GtidListEvent(tuple(entries), trailer=b"" if entries else b"\0\0")

    def stamp(self, buf: bytearray, offsets, gno: int) -> int:
        pack = _SEQ_DOMAIN.pack_into
        domain = self.domain_id
        for at in offsets:
            if buf[at + 4] != MARIADB_GTID_EVENT or event_size(buf, at) != MARIADB_GTID_EVENT_SIZE:
                raise ValueError(
                    f"no MariaDB GTID event at offset {at} (event type {buf[at + 4]}): every "
                    "transaction of a GTID-numbered binlog starts with one"
                )
            gno += 1
            pack(buf, at + MARIADB_GTID_SEQ_OFFSET, gno, domain)
        return gno

    def last(self, path: Path, end: int) -> int | None:
        found = self.last_gtid(path, end)
        return None if found is None else found.seq_no

    def last_gtid(self, path: Path, end: int) -> DomainGtid | None:
        """The last GTID of the file before `end` (else the last of its GTID_LIST; seq_no 0
        when that is empty); None if the header is incomplete."""
        if path.stat().st_size == 0:
            return None
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            head = self._parse_head(m, path)
            if head is None:
                return None
            needle = (
                bytes((MARIADB_GTID_EVENT,))
                + _U32.pack(head.server_id)
                + _U32.pack(MARIADB_GTID_EVENT_SIZE)
            )
            hit = m.rfind(needle, head.end, min(end, len(m)))
            while hit >= 0:
                at = hit - 4
                if self._is_ours(m, at):
                    return DomainGtid(self.domain_id, head.server_id, _seq(m, at))
                hit = m.rfind(needle, head.end, hit + len(needle) - 1)
        if head.gtid_list:
            return head.gtid_list[-1]
        return DomainGtid(self.domain_id, head.server_id, 0)

    def head(self, path: Path) -> FileHead | None:
        with open(path, "rb") as f:
            buf = f.read(_HEAD_READ)
        head = self._parse_head(buf, path)
        if head is None and len(buf) == _HEAD_READ:  # a huge GTID_LIST: read the whole header
            head = self._parse_head(path.read_bytes(), path)
        return head

    def _parse_head(self, buf, path: Path) -> FileHead | None:
        fde_at = 4
        if len(buf) < fde_at + HEADER_LEN:
            return None
        server_id = header_server_id(buf, fde_at)
        at = fde_at + event_size(buf, fde_at)
        if len(buf) < at + HEADER_LEN or buf[at + 4] != GTID_LIST_EVENT:
            return None if len(buf) < at + HEADER_LEN else FileHead(at, server_id, ())
        end = at + event_size(buf, at)
        if len(buf) < end:
            return None
        listed = GtidListEvent.parse(bytes(buf[at + HEADER_LEN : end - 4]), None).gtids  # type: ignore[arg-type]
        foreign = [g for g in listed if g.domain_id != self.domain_id]
        if foreign:
            raise CodecError(
                f"{path.name} holds GTIDs of domain {foreign[0].domain_id} "
                f"({position_text(listed)}), but this global binlog's [dumper] gtid_domain_id "
                f"is {self.domain_id}: set it back, or start from new files",
                file=str(path),
            )
        return FileHead(end, server_id, listed)

    def _is_ours(self, m, at: int) -> bool:
        return (
            is_whole_event(m, at, MARIADB_GTID_EVENT, MARIADB_GTID_EVENT_SIZE)
            and _U32.unpack_from(m, at + MARIADB_GTID_DOMAIN_OFFSET)[0] == self.domain_id
        )

    def locate(self, path: Path, seq_no: int, start: int = 0) -> int | None:
        """Where the GTID event with `seq_no` starts in the file (at or after `start`), or
        None (seq_no and domain side by side in its body)."""
        needle = _SEQ_DOMAIN.pack(seq_no, self.domain_id)
        return find_event(path, needle, MARIADB_GTID_SEQ_OFFSET, self._is_ours, start)


def _seq(m, at: int) -> int:
    return int.from_bytes(
        m[at + MARIADB_GTID_SEQ_OFFSET : at + MARIADB_GTID_SEQ_OFFSET + 8], "little"
    )
