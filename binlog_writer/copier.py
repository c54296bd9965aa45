"""BinlogCopier: a byte-for-byte copy of another writer's files (an HA follower's copy of the
leader's global binlog), fed with the events of a COM_BINLOG_DUMP.

The copy has the same names, index and bytes as the original. Two details make that so: the
dump sends each file's FDE with the in-use flag cleared (its CRC is computed as if cleared, so
it is unchanged), and the copy sets the flag again while the file is active, clearing it when
the file's ROTATE or STOP arrives, as `BinlogWriter` does. Only whole transactions (up to their
`CTS::` mark) reach the file, so the copy never shows a partial transaction to its own readers
and a new leader's recovery finds nothing to drop.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Protocol

from cdc.binlog.constants import BINLOG_MAGIC, HEADER_LEN, EventType
from cdc.binlog.errors import CodecError
from cdc.binlog.header import log_pos, timestamp

from . import layout, recovery_point
from .recovery import HEADER_GTID_EVENTS, is_cts_mark
from .recovery_point import RecoveryPoint, scan_file

log = logging.getLogger(__name__)

_U16 = struct.Struct("<H")
_FILE_END_EVENTS = (EventType.ROTATE, EventType.STOP)


class CopyError(RuntimeError):
    """The stream does not continue the copy (a gap or a foreign file); names file and position."""


class BinlogCopier:
    def __init__(
        self, directory: str | os.PathLike[str], *, base: str = "binlog", sync_ms: int = 100
    ):
        layout.check_base(base)
        self.dir = Path(directory)
        self.base = base
        self.dir.mkdir(parents=True, exist_ok=True)
        self._sync_s = sync_ms / 1000
        self._fd: int | None = None
        self.file = ""  # the file being written ("" = none yet)
        self.pos = 0  # end of the last whole transaction written
        self._pending = bytearray()  # events of the transaction being received
        self._unsynced = False
        self._last_sync = time.monotonic()
        self._finished = False  # the current file ended with ROTATE/STOP
        self._point = RecoveryPoint(self.dir, base)
        self._txn_end = 0  # end of the last whole transaction of `file` (0: none yet)
        self._recover()
        # (file, pos) the copy held when it was last fsynced: what a follower acknowledges.
        self.synced = (self.file, self.pos)

    # ---------------------------------------------------------------- open / recovery

    def _recover(self) -> None:
        names = layout.read_index(self.dir, self.base)
        if not names:
            return
        path = self.dir / names[-1]
        size = path.stat().st_size if path.exists() else 0
        result = scan_file(path, self._point.load(names[-1])) if size >= 4 else None
        if result is None or result.header_end == 0:
            # Nothing but (part of) a header: fetch the file again from its start.
            truncate_copy(self.dir, self.base, names[-1], 4)
            self._recover()
            return
        self.file = names[-1]
        self.pos = result.valid_end
        self._txn_end = result.last_txn_end or 0
        self._finished = result.closed_by is not None
        if result.torn_bytes:
            log.warning(
                "%s: dropping %d bytes after position %d (%s)",
                path,
                result.torn_bytes,
                result.valid_end,
                result.reason,
            )
        if not self._finished:
            self._fd = os.open(path, os.O_WRONLY)
            os.ftruncate(self._fd, self.pos)
            os.lseek(self._fd, self.pos, os.SEEK_SET)

    def resume_point(self) -> tuple[str, int]:
        """Where the dump continues: (file, pos); ("", 4) = the first file of the index."""
        if not self.file:
            return "", 4
        if self._finished:
            # A finished file is followed by the next number (ROTATE names it; after STOP the
            # writer starts it on its next open).
            return layout.file_name(self.base, layout.file_number(self.file) + 1), 4
        return self.file, self.pos

    # ---------------------------------------------------------------- events

    def add(self, file: str, pos: int, data: bytes) -> None:
        """One event of the dump stream, as stored in `file` at `pos`."""
        code = data[4]
        if code == EventType.FORMAT_DESCRIPTION:
            if log_pos(data) == 0:
                return  # re-sent at a mid-file start: not part of the file
            self._begin_file(file, data)
            return
        expected = self.pos + len(self._pending)
        if file != self.file or pos != expected:
            raise CopyError(
                f"copy of the global binlog: got an event for {file}:{pos} but the copy "
                f"continues at {self.file or '(no file)'}:{expected}"
            )
        self._pending += data
        if code in _FILE_END_EVENTS:
            self._write_pending()
            self._finish_file(timestamp(data))
        elif code in HEADER_GTID_EVENTS:
            self._write_pending()
        elif is_cts_mark(data):
            self._write_pending()
            self._txn_end = self.pos

    def _begin_file(self, name: str, fde: bytes) -> None:
        if self._pending:
            raise CopyError(
                f"copy of the global binlog: {self.file} ended inside a transaction "
                f"({len(self._pending)} bytes after {self.pos}) and {name} began"
            )
        if self.file and not self._finished:
            raise CopyError(
                f"copy of the global binlog: {name} began before {self.file} was finished "
                f"(copy at {self.file}:{self.pos})"
            )
        layout.file_number(name)
        header = bytearray(BINLOG_MAGIC + fde)
        # Active file: the in-use flag is set in the original too (its CRC ignores the flag).
        flags = _U16.unpack_from(header, layout.FDE_FLAGS_OFFSET)[0] | 1
        _U16.pack_into(header, layout.FDE_FLAGS_OFFSET, flags)
        self._close_fd()
        path = self.dir / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, header)
        os.fsync(fd)
        layout.append_index(self.dir, self.base, name)
        layout.fsync_dir(self.dir)
        self._fd, self.file, self.pos, self._finished = fd, name, len(header), False
        self._txn_end = 0
        self.synced = (name, self.pos)

    def _write_pending(self) -> None:
        assert self._fd is not None
        buf, n = self._pending, 0
        while n < len(buf):
            n += os.write(self._fd, memoryview(buf)[n:])
        self.pos += len(buf)
        self._pending = bytearray()
        self._unsynced = True

    def _finish_file(self, ended_at: int) -> None:
        self.sync()
        self._close_fd()
        path = self.dir / self.file
        _set_in_use(path, False)
        if ended_at > 0:
            # Dated as the leader's file is (its last write is the ROTATE/STOP), not by when
            # it was copied: `expire_logs_seconds` purges a copy's file when it purges the
            # leader's, however late the copy was made (a re-seed copies them all at once).
            os.utime(path, (ended_at, ended_at))
        self._finished = True

    def maybe_sync(self) -> None:
        if self._unsynced and time.monotonic() - self._last_sync >= self._sync_s:
            self.sync()

    def sync(self) -> None:
        if self._fd is not None and self._unsynced:
            os.fsync(self._fd)
            if self._txn_end:
                self._point.save(self.file, self._txn_end)
        self._unsynced = False
        self.synced = (self.file, self.pos)
        self._last_sync = time.monotonic()

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def close(self) -> None:
        """Keeps the pending partial transaction out of the file (it is fetched again)."""
        self._pending = bytearray()
        self.sync()
        self._close_fd()


class _DumpedEvent(Protocol):
    file: str
    pos: int
    data: bytes


class _Dump(Protocol):
    """What `copy_dump` reads: a dump client (`cdc.protocol.DumpClient`)."""

    def batches(self) -> AsyncIterator[Sequence[_DumpedEvent]]: ...

    async def close(self) -> None: ...


async def copy_dump(client: _Dump, copier: BinlogCopier) -> None:
    """Every event `client` dumps, into `copier`; both closed at the end, also on an error (which
    the caller words: a re-seed's copy of a leader, a flashback's of a remote dumper)."""
    try:
        async for batch in client.batches():
            for ev in batch:
                copier.add(ev.file, ev.pos, ev.data)
    finally:
        copier.close()
        await client.close()


def _set_in_use(path: Path, in_use: bool) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        flags = _U16.unpack(os.pread(fd, 2, layout.FDE_FLAGS_OFFSET))[0]
        flags = flags | 1 if in_use else flags & ~1
        os.pwrite(fd, _U16.pack(flags), layout.FDE_FLAGS_OFFSET)
        os.fsync(fd)
    finally:
        os.close(fd)


def truncate_copy(directory: Path, base: str, file: str, pos: int) -> bool:
    """Cut the copy back to `file:pos` (a transaction boundary of the new leader's stream):
    later files are removed from the index and deleted; `pos <= 4` removes `file` itself.
    Returns whether anything was cut. The active file gets its in-use flag back."""
    names = layout.read_index(directory, base)
    target = layout.file_number(file)
    keep = [n for n in names if layout.file_number(n) < target or (n == file and pos > 4)]
    cut = False
    recovery_point.cut(directory, base, keep, file, pos)
    if keep != names:
        # Under the index lock: the server process's retention may rewrite the index (a purge
        # of the copy's oldest files) at the same time; neither rewrite may undo the other.
        with layout.index_lock(directory):
            keep = [n for n in layout.read_index(directory, base) if n in keep]
            layout.rewrite_index(directory, base, keep, fsync=True)
        for n in names:
            if n not in keep:
                (directory / n).unlink(missing_ok=True)
        layout.fsync_dir(directory)
        cut = True
    if file in keep:
        path = directory / file
        if path.stat().st_size > pos:
            if pos < HEADER_LEN:
                raise CodecError(f"cannot cut {path} inside its header (at {pos})")
            with open(path, "rb+") as f:
                f.truncate(pos)
                os.fsync(f.fileno())
            _set_in_use(path, True)
            cut = True
    return cut
