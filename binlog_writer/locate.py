"""Where a transaction of the global binlog is, by any of its three names: its commit TSO
(the `CTS::` mark), its GTID, or a file position inside it. `cdc locate` prints the other two.

Read from the files alone (a follower's copy answers like its leader). A transaction is the
span from its first event (its GTID, or BEGIN in files written before GTIDs) to the end of
its CTS mark; the walk over a file's events is Python, so a lookup costs a few seconds for a
512 MB file: a tool's cost, not the server's. A GTID is found by its bytes (`gtids.locate`)
and a TSO by the first mark of each file first, so only one file is walked. With `archive`
(`[dumper] archive_dir`) the archived files before the live ones are read too (`readable`)."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cdc.binlog.constants import HEADER_LEN, EventType
from cdc.binlog.events import cts_mark_text, parse_cts
from cdc.binlog.gtid import gtid_text, parse_gtid
from cdc.binlog.header import server_id as header_server_id
from cdc.binlog.reader import EventReader

from . import gtids
from .readable import ReadableFiles

_FILE_EVENTS = (
    EventType.FORMAT_DESCRIPTION,
    EventType.PREVIOUS_GTIDS,
    EventType.GTID_LIST,
    EventType.ROTATE,
    EventType.STOP,
)
_MARIADB_GTID = re.compile(r"^\d+-\d+-\d+$")  # domain-server_id-seq_no


class LocateError(LookupError):
    """No transaction has that name in these files."""


@dataclass(frozen=True, slots=True)
class Located:
    file: str
    position: int  # where the transaction starts (its GTID event)
    end: int  # where it ends (after its CTS mark): the next transaction's position
    # `uuid:n`, or `domain-server_id-seq_no` in the mariadb flavour (two for a CREATE TABLE:
    # its CREATE DATABASE has one)
    gtids: tuple[str, ...]
    tso: int
    mark: str  # the whole CTS mark (`CTS::<tso>[::L<dn>.<seq>]`)

    def __str__(self) -> str:
        gtid = ",".join(self.gtids) or "-"
        return f"{self.file}:{self.position} end={self.end} gtid={gtid} tso={self.tso} mark={self.mark}"


def transactions(directory: Path, name: str, start: int = 4) -> Iterator[Located]:
    """The whole transactions of one file, from `start` (a transaction boundary) on."""
    return transactions_in((directory / name).read_bytes(), name, start)


def transactions_in(data: bytes, name: str, start: int = 4) -> Iterator[Located]:
    """`transactions` of file `name` read already (`data`: its bytes)."""
    head = EventReader(data, file=name, allow_partial_tail=True)
    if start > 4:
        next(iter(head), None)  # the FORMAT_DESCRIPTION, which a reader from `start` needs
        head = EventReader(data, file=name, start=start, fde=head.fde, allow_partial_tail=True)
    begin, found = None, []
    for ev in head:
        code = ev.type_code
        if code in _FILE_EVENTS:
            continue
        if begin is None:
            begin, found = ev.pos, []
        if code == EventType.GTID:
            found.append(
                gtid_text(
                    bytes(ev.data[HEADER_LEN + 1 : HEADER_LEN + 17]), gtids.gno_at(ev.data, 0)
                )
            )
        elif code == EventType.MARIADB_GTID:
            seq_no, domain = struct.unpack_from("<QI", ev.data, HEADER_LEN)
            found.append(f"{domain}-{header_server_id(ev.data)}-{seq_no}")
        elif (mark := cts_mark_text(ev.data)) is not None:
            yield Located(name, begin, ev.end, tuple(found), parse_cts(mark) or 0, mark.decode())
            begin = None


def by_position(
    directory: Path, base: str, file: str, pos: int, archive: Path | None = None
) -> Located:
    """The transaction that holds `file:pos` (or starts there)."""
    files = ReadableFiles(directory, base, archive)
    if file not in files.names():
        raise LocateError(f"{file} is not in {base}.index" + (" nor archived" if archive else ""))
    for txn in transactions_in(files.read_bytes(file), file):
        if txn.position <= pos < txn.end:
            return txn
    raise LocateError(f"no whole transaction holds {file}:{pos}")


def by_gtid_text(directory: Path, base: str, text: str, archive: Path | None = None) -> Located:
    """A MySQL GTID `uuid:n` or a MariaDB one `domain-server_id-seq_no`."""
    text = text.strip()
    if not _MARIADB_GTID.match(text):
        return by_gtid(directory, base, *parse_gtid(text), archive=archive)
    # The mariadb flavour: a walk of every file (a tool's cost; its GTID_LIST could pick the file).
    files = ReadableFiles(directory, base, archive)
    for name in files.names():
        for txn in transactions_in(files.read_bytes(name), name):
            if text in txn.gtids:
                return txn
    raise LocateError(f"GTID {text} is not in these files")


def by_gtid(
    directory: Path, base: str, sid: bytes, gno: int, archive: Path | None = None
) -> Located:
    files = ReadableFiles(directory, base, archive)
    for name in reversed(files.names()):
        path = files.path(name)
        if gtids.file_previous_gtids(path).last(sid) >= gno:
            continue  # an earlier file
        at = gtids.locate(path, sid, gno)
        if at is None:
            break
        # From the GTID event itself: a transaction of its own, or the CREATE TABLE of a DDL
        # whose CREATE DATABASE holds the GTID before (a statement a replica applies alone).
        txn = next(transactions(path.parent, name, at), None)
        if txn is not None:
            return txn
        break
    raise LocateError(f"GTID {gtid_text(sid, gno)} is not in these files")


def by_tso(directory: Path, base: str, tso: int, archive: Path | None = None) -> Located:
    """The first transaction with a commit TSO at or above `tso`."""
    files = ReadableFiles(directory, base, archive)
    names = files.names()
    first = 0  # the last file whose first transaction is at or below `tso`
    for i in range(len(names) - 1, -1, -1):
        head = next(transactions_in(files.read_bytes(names[i]), names[i]), None)
        if head is not None and head.tso <= tso:
            first = i
            break
    for name in names[first:]:
        for txn in transactions_in(files.read_bytes(name), name):
            if txn.tso >= tso:
                return txn
    raise LocateError(f"no transaction at or after TSO {tso} in these files (yet)")
