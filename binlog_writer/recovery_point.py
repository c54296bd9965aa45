"""The recovery point: the newest transaction boundary known to be durable, so that opening a
big file after a crash scans only what follows it instead of the whole file (a 60 MB file took
6 s to scan in Python, twice per HA takeover).

`<dir>/recovery-point-<base>` holds one fixed-size record `file pos crc`, rewritten in place
after each fsync of the binlog file (so everything before `pos` is on disk when the record
says so; the record itself needs no fsync: a lost update only means an older point, a torn
one fails its CRC). A reader trusts a point only if the event ending at `pos` is a `CTS::`
mark with a valid CRC and `log_pos == pos` (`mark_ending_at`); otherwise it scans the whole
file as before. Whoever cuts a file below its point (`copier.truncate_copy`) clears it.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import zlib
from pathlib import Path

from cdc.binlog.constants import HEADER_LEN
from cdc.binlog.events import MARK_CARRIERS, cts_mark_text
from cdc.binlog.header import event_size
from cdc.binlog.header import log_pos as header_log_pos

from .recovery import Boundary, TailScan, scan

log = logging.getLogger(__name__)

_RECORD = 64
_U32 = struct.Struct("<I")
_MAX_MARK = 1024  # a CTS mark is `CTS::<tso>[::L<dn>.<seq>]`: far below this


def path_of(directory: Path, base: str) -> Path:
    # Not `<base>.*`: tools comparing copies list the binlog files by that prefix.
    return directory / f"recovery-point-{base}"


class RecoveryPoint:
    def __init__(self, directory: str | os.PathLike[str], base: str):
        self.path = path_of(Path(directory), base)
        self._saved: tuple[str, int] | None = None
        self._failing = False  # the last save failed (said once until one succeeds)

    def save(self, file: str, pos: int) -> None:
        """`file:pos` ends a transaction and everything before it is fsynced.

        A point that cannot be written (its first write needs a block of a full disk) is not
        a failed write of the binlog: the bytes it would point past are already in the file,
        so raising here would make the caller count a transaction that is there as one that
        is not (and write it again). An older point is only a longer scan: said once."""
        if self._saved == (file, pos):
            return
        text = f"{file} {pos}"
        line = f"{text} {zlib.crc32(text.encode()):08x}".ljust(_RECORD - 1) + "\n"
        try:
            # Opened each time (a few µs per fsync of the binlog): `clear` may unlink it meanwhile.
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.pwrite(fd, line.encode(), 0)
            finally:
                os.close(fd)
        except OSError as exc:
            if not self._failing:
                self._failing = True
                log.warning(
                    "recovery point %s not saved (%s): a restart scans from an older point",
                    self.path,
                    exc,
                )
            return
        self._failing = False
        self._saved = (file, pos)

    def saved(self) -> tuple[str, int] | None:
        """The saved (file, pos), unverified (see `mark_ending_at`)."""
        try:
            name, pos, crc = self.path.read_bytes()[:_RECORD].decode().split()
        except (OSError, ValueError):
            return None
        if f"{zlib.crc32(f'{name} {pos}'.encode()):08x}" != crc:
            return None
        return name, int(pos)

    def load(self, file: str) -> int | None:
        """The saved position if it is for `file`."""
        saved = self.saved()
        return saved[1] if saved is not None and saved[0] == file else None


def cut(directory: Path, base: str, keep: list[str], file: str, pos: int) -> None:
    """The copy is being cut back to `file:pos` (files after it deleted): forget a point
    beyond that, since the bytes there will be different ones."""
    saved = RecoveryPoint(directory, base).saved()
    if saved is not None and (saved[0] not in keep or (saved[0] == file and saved[1] > pos)):
        path_of(directory, base).unlink(missing_ok=True)


def mark_ending_at(buf: bytes | bytearray | memoryview, pos: int, header_end: int) -> bytes | None:
    """The text of the `CTS::` mark event (either carrier) that ends exactly at `pos`, if there
    is one whose header says so (`event_size`, `log_pos`) and whose CRC is right; else None."""
    found = mark_event_ending_at(buf, pos, header_end)
    return None if found is None else found[1]


def mark_event_ending_at(
    buf: bytes | bytearray | memoryview, pos: int, header_end: int
) -> tuple[int, bytes] | None:
    """`mark_ending_at`'s event: where it starts and its mark text (None: no such mark)."""
    if pos > len(buf):
        return None
    for start in range(pos - HEADER_LEN - 5, max(header_end, pos - _MAX_MARK) - 1, -1):
        if buf[start + 4] not in MARK_CARRIERS:
            continue
        size = event_size(buf, start)
        log_pos = header_log_pos(buf, start)
        if size != pos - start or log_pos != pos:
            continue
        event = bytes(buf[start:pos])
        if zlib.crc32(event[:-4]) == _U32.unpack_from(event, len(event) - 4)[0]:
            mark = cts_mark_text(event)
            if mark is not None:
                return start, mark
    return None


def scan_file(
    path: Path, anchor_pos: int | None, *, boundary: Boundary = Boundary.MARK
) -> TailScan:
    """`recovery.scan` of the file at `path`, from `anchor_pos` (a saved recovery point) if
    the mark ending there checks out, else of the whole file. Maps the file: an anchored scan
    reads only its header and the bytes after the point."""
    size = path.stat().st_size
    if size == 0:
        return scan(b"", boundary=boundary, file=str(path))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)
        try:
            anchor = None
            if anchor_pos is not None and HEADER_LEN < anchor_pos <= size:
                mark = mark_ending_at(view, anchor_pos, 4)
                if mark is not None:
                    anchor = (anchor_pos, mark)
                else:
                    log.warning(
                        "%s: recovery point %d is not a transaction end; scanning the whole file",
                        path,
                        anchor_pos,
                    )
            return scan(view, boundary=boundary, file=str(path), anchor=anchor)
        finally:
            view.release()
