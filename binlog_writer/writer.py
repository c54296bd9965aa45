"""BinlogWriter: append whole transactions to `<base>.NNNNNN` files listed in `<base>.index`,
with correct log_pos and CRC, size/on-demand rotation, an fsync policy, and crash recovery of
the newest file on open. I/O is kept thin around `recovery.scan` and `fastpath.stamp_positions`."""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cdc import stage_trace
from cdc.binlog import header
from cdc.binlog.constants import CHECKSUM_LEN, HEADER_LEN
from cdc.binlog.errors import CodecError
from cdc.binlog.events import CTS_PREFIX, ROWS_QUERY_MARK, RotateEvent, StopEvent, encode_event
from cdc.binlog.fastpath import stamp_positions
from cdc.binlog.fde import DEFAULT_SERVER_VERSION
from cdc.binlog.header import event_size, log_pos

from . import gtids, layout
from .fsync import FsyncMode, FsyncPolicy
from .gtids import GtidLayout
from .recovery import Boundary, TailScan, is_cts_mark, is_terminator
from .recovery_point import RecoveryPoint, scan_file

log = logging.getLogger(__name__)

_U16 = struct.Struct("<H")
DEFAULT_MAX_FILE_SIZE = 512 * 1024 * 1024
DEFAULT_BUFFER_SIZE = 256 * 1024


class TxnPosition(NamedTuple):
    """Where a transaction landed: file name, start offset, end offset (= next position)."""

    file: str
    start: int
    end: int


@dataclass(slots=True, frozen=True)
class RecoveryReport:
    """What opening the writer found in the newest file."""

    file: str
    scan: TailScan | None  # None when a fresh file was started
    truncated_bytes: int
    started_new_file: bool


class BinlogWriter:
    """Append-only writer of MySQL 5.7-flavoured binlog files.

    Contract: `append_transaction` gets one whole transaction whose last event is its
    terminator (see `recovery.Boundary`); a transaction is never split across files.
    `close()` writes STOP and clears the FDE in-use flag (as MySQL does on shutdown); the next
    open then starts a new file. After a crash, open truncates the newest file to its last
    complete transaction and keeps appending to it.

    Visibility: with the per-transaction fsync policy every transaction reaches the file at
    once. With the other policies transactions collect in a user-space buffer of
    `buffer_size` bytes that is written when full, when an fsync is due, on rotate/close and
    on `flush()`; a reader of the live file (the dump server) calls `flush()` first.
    Buffered transactions are lost on a crash, which recovery handles like a torn tail.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        base: str = "binlog",
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        fsync: FsyncPolicy | None = None,
        server_id: int = 1,
        boundary: Boundary = Boundary.MARK,
        server_version: str = DEFAULT_SERVER_VERSION,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        clock=time.time,
        gtids: GtidLayout | None = None,
    ) -> None:
        layout.check_base(base)
        self.dir = Path(directory)
        self.base = base
        self.max_file_size = max_file_size
        self.fsync = fsync or FsyncPolicy.per_txn()
        self.server_id = server_id
        self.boundary = boundary
        self.server_version = server_version
        self._clock = clock
        self._fd: int | None = None
        self._file_name = ""
        self._number = 0
        self._pos = 0
        self._header_end = 0
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self._pending = bytearray()
        self._buffer_size = 0 if self.fsync.mode == FsyncMode.TXN else buffer_size
        self._mark_only = boundary == Boundary.MARK
        self._stream_start: int | None = None  # set while a streamed transaction is written
        self._stream_tail = b""
        # GTID numbering (`gtids`): with a layout (MySQL's or MariaDB's), every transaction
        # starts with its GTID event, which gets the next gno here; `gno` is the last one
        # written (read back from the files). The layout also chooses the files' FDE.
        self.gtids = gtids
        self.gno = 0
        # MARK mode: the event every transaction ends with, the layout's CTS mark carrier
        # (MariaDB's files: a BINLOG_CHECKPOINT; else a ROWS_QUERY), checked per write.
        self.mark = gtids.mark if gtids is not None else ROWS_QUERY_MARK
        self._mark_type = self.mark.type_code
        self._mark_at = self.mark.text_at
        self._mark_stop = self.mark.text_at + len(CTS_PREFIX)
        self._stream_gno: int | None = None  # gno before a streamed transaction, until it ends
        # (file number, end) of the last whole transaction known to be in the file: where
        # `abandon` leaves the writer after a failed write.
        self._whole = (0, 0)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._point = RecoveryPoint(self.dir, base)  # where recovery may start scanning
        # Told each fsync's seconds (the dumper's fsync latency histogram, dumper/metrics.py).
        self.on_fsync: Callable[[float], None] | None = None
        self.recovery = self._open()

    # ------------------------------------------------------------------ state

    @property
    def file(self) -> str:
        return self._file_name

    def _set_number(self, number: int) -> None:
        self._number = number
        self._file_name = layout.file_name(self.base, number)

    @property
    def path(self) -> Path:
        return self.dir / self.file

    @property
    def position(self) -> int:
        """End offset of the current file (where the next transaction starts)."""
        return self._pos

    def visible_end(self, name: str) -> int | None:
        """Where readers of file `name` must stop: the start of a transaction still being
        streamed into it (its events are in the file, the transaction is not); None: the file
        holds whole transactions only."""
        return self._stream_start if name == self._file_name else None

    @property
    def closed(self) -> bool:
        return self._fd is None

    def files(self) -> list[str]:
        return layout.read_index(self.dir, self.base)

    # ------------------------------------------------------------------ open / recovery

    def _open(self) -> RecoveryReport:
        names = layout.read_index(self.dir, self.base)
        if not names:
            self._start_file(1)
            return RecoveryReport(self.file, None, 0, True)
        report = self._recover(names)
        if self.gtids is not None and not report.started_new_file:
            self.gno = self._last_gno(names, self._pos)
            if self.gtids.server_id_per_file and self._file_server_id() != self.server_id:
                # A file's MariaDB GTIDs carry its FDE's server_id (read back by it): a writer
                # with another server_id continues in a file of its own.
                self.rotate()
                report = RecoveryReport(self.file, report.scan, report.truncated_bytes, True)
        return report

    def _file_server_id(self) -> int:
        with open(self.path, "rb") as f:
            head = f.read(4 + HEADER_LEN)
        return header.server_id(head, 4)

    def _last_gno(self, names: list[str], end: int | None) -> int:
        """The last gno in the files `names`, the newest one read up to `end` (None: whole)."""
        assert self.gtids is not None
        for i in range(len(names) - 1, -1, -1):
            path = self.dir / names[i]
            if not path.exists():
                break
            upto = end if end is not None and i == len(names) - 1 else path.stat().st_size
            gno = self.gtids.last(path, upto)
            if gno is not None:
                return gno
        return 0

    def _recover(self, names: list[str]) -> RecoveryReport:
        newest = names[-1]
        path = self.dir / newest
        number = layout.file_number(newest)
        if not path.exists():
            raise CodecError(
                f"{newest} is listed in {self.base}.index but missing from {self.dir}; "
                "restore it or remove it from the index",
                file=str(path),
            )
        result = scan_file(path, self._point.load(newest), boundary=self.boundary)
        if result.closed_by is not None:
            # Clean close (STOP) or a rotation interrupted before the next file was indexed.
            if result.in_use:
                self._clear_in_use(path)
            if self.gtids is not None:
                self.gno = self._last_gno(names, None)
            self._start_file(number + 1)
            return RecoveryReport(self.file, result, 0, True)
        if result.header_end == 0:
            log.warning("%s: header incomplete (%s); rewriting it", path, result.reason)
            if self.gtids is not None:
                self.gno = self._last_gno(names[:-1], None)
            self._set_number(number)
            self._create_file(path)
            self._whole = (number, self._pos)
            return RecoveryReport(self.file, result, result.size, False)
        truncated = result.torn_bytes
        if truncated:
            log.warning(
                "%s: dropping %d bytes after position %d (%s); last CTS %s",
                path,
                truncated,
                result.valid_end,
                result.reason,
                result.last_cts,
            )
        self._fd = os.open(path, os.O_WRONLY)
        os.ftruncate(self._fd, result.valid_end)
        os.lseek(self._fd, result.valid_end, os.SEEK_SET)
        os.fsync(self._fd)
        self._set_number(number)
        self._pos = result.valid_end
        self._header_end = result.header_end
        self._whole = (number, self._pos)
        return RecoveryReport(self.file, result, truncated, False)

    def _start_file(self, number: int) -> None:
        self._set_number(number)
        path = self.dir / self.file
        self._create_file(path)
        layout.append_index(self.dir, self.base, self.file, fsync=self._durable)
        if self._durable:
            layout.fsync_dir(self.dir)
        self._whole = (number, self._pos)

    def _create_file(self, path: Path) -> None:
        header = layout.file_header(
            server_id=self.server_id,
            timestamp=int(self._clock()),
            server_version=self.server_version,
            **self._gtid_header(),
        )
        # O_TRUNC: a file that is not in the index (or whose header is torn) holds no transaction.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, header)
        if self._durable:
            os.fsync(fd)
        self._fd = fd
        self._pos = self._header_end = len(header)

    def _gtid_header(self) -> dict:
        """The FDE and the GTIDs-before event of the next file (`file_header`'s arguments)."""
        if self.gtids is None:
            return {}
        previous = self.dir / layout.file_name(self.base, self._number - 1)
        return {
            "fde": self.gtids.fde(self.server_version),
            "gtids": self.gtids.header_event(previous if self._number > 1 else None, self.gno),
        }

    @property
    def _durable(self) -> bool:
        return self.fsync.mode != "never"

    @staticmethod
    def _clear_in_use(path: Path) -> None:
        fd = os.open(path, os.O_RDWR)
        try:
            raw = os.pread(fd, 2, layout.FDE_FLAGS_OFFSET)
            flags = _U16.unpack(raw)[0] & ~1
            os.pwrite(fd, _U16.pack(flags), layout.FDE_FLAGS_OFFSET)
            os.fsync(fd)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ append

    def append_transaction(
        self, events: Iterable[bytes | bytearray | memoryview | object]
    ) -> TxnPosition:
        """Append one whole transaction. Items are raw events (header + body + 4 CRC bytes,
        any log_pos/CRC: both are rewritten) or codec bodies (encoded with this writer's
        server_id and the current time). Returns where it landed."""
        try:
            buf = bytearray().join(events)  # type: ignore[arg-type]
        except TypeError:
            buf = bytearray().join(self._encode_bodies(events))
        return self.append_encoded(buf)

    def append_encoded(self, buf: bytearray) -> TxnPosition:
        """`append_transaction` for a transaction already joined into one buffer of raw
        events (any log_pos/CRC: both are rewritten in place): no copy before the write."""
        if self._fd is None:
            raise RuntimeError("BinlogWriter is closed")
        if self._stream_start is not None:
            raise RuntimeError("a transaction appended while a streamed one is open")
        if not buf:
            raise ValueError("empty transaction")
        start = self._pos
        if start + len(buf) > self.max_file_size and start > self._header_end:
            self.rotate()
            start = self._pos
        gno = self._stamp_gtids(buf, self._gtids_in(buf, 0, len(buf)))
        last = stamp_positions(buf, start)
        if not (self._mark_only and self._is_mark(buf, last)):
            self._check_last(buf, last)
        self.gno = gno  # only once the transaction is known whole: a refused one takes none
        return self._append(buf, start)

    def append_batch(
        self, buf: bytearray, ends: list[int], gtid_at: list[int] | None = None
    ) -> list[tuple[str, int]]:
        """Several whole transactions joined in one buffer, `ends[i]` the end of the i-th in
        it: the same as `append_encoded` of each in turn (a file rotates between two of them
        when the next would overflow it), with one stamping pass and one write per file
        instead of per transaction. Returns (file, index of its first transaction here) for
        each file the batch went into. A GTID-numbered writer numbers the GTID events at the
        offsets `gtid_at` (sorted; found by walking the events when None)."""
        if self._fd is None:
            raise RuntimeError("BinlogWriter is closed")
        if self._stream_start is not None:
            raise RuntimeError("a transaction appended while a streamed one is open")
        if not ends or ends[-1] != len(buf):
            raise ValueError("the transactions' ends do not cover the buffer")
        files: list[tuple[str, int]] = []
        done = i = 0
        n = len(ends)
        while i < n:
            start = self._pos
            # The transactions from i on that fit in this file; a fresh file takes at least one.
            j = bisect.bisect_right(ends, done + self.max_file_size - start, i, n)
            if j == i:
                if start > self._header_end:
                    self.rotate()
                    continue
                j = i + 1
            end = ends[j - 1]
            if gtid_at is None:
                here = self._gtids_in(buf, done, end)
            else:
                here = gtid_at[bisect.bisect_left(gtid_at, done) : bisect.bisect_left(gtid_at, end)]
            gno = self._stamp_gtids(buf, here, done, j - i)
            last = stamp_positions(buf, start, done, end)
            part = memoryview(buf)[done:end]
            if not (self._mark_only and self._is_mark(buf, last)):
                self._check_last(part, last - done)
            files.append((self._file_name, i))
            self.gno = gno
            self._append(part, start, j - i)
            part.release()
            done, i = end, j
        return files

    def _is_mark(self, buf: bytearray, at: int) -> bool:
        """The fast check that the event at `at` is this layout's CTS mark (else
        `_check_last` looks at the event in full)."""
        return (
            buf[at + 4] == self._mark_type
            and buf[at + self._mark_at : at + self._mark_stop] == CTS_PREFIX
        )

    def _gtids_in(self, buf: bytearray, start: int, end: int) -> list[int]:
        """Where the GTID events are (walking the events: a caller that knows says so)."""
        if self.gtids is None:
            return []
        return gtids.find(buf, start, end, self.gtids.event_type)

    def _stamp_gtids(
        self, buf: bytearray, offsets: list[int], start: int = 0, txns: int = 1
    ) -> int:
        """Number the GTID events at `offsets` after `self.gno`; returns the last number given
        (the caller makes it `self.gno` once the transactions are accepted). The `txns`
        transactions from `start` on each begin with one (a DDL may hold two: `CREATE
        DATABASE` before its `CREATE TABLE`). Without a sid: nothing to number."""
        if self.gtids is None:
            return self.gno
        if len(offsets) < txns or offsets[0] != start:
            raise ValueError(
                f"{txns} transaction(s) with {len(offsets)} GTID event(s) (the first at "
                f"{offsets[0] if offsets else None}, not {start}): every transaction of a "
                "GTID-numbered binlog starts with one"
            )
        return self.gtids.stamp(buf, offsets, self.gno)

    def _encode_bodies(self, events: Iterable[object]) -> list[bytes | bytearray | memoryview]:
        now = int(self._clock())
        return [
            ev
            if isinstance(ev, bytes | bytearray | memoryview)
            else encode_event(ev, timestamp=now, server_id=self.server_id)
            for ev in events
        ]

    def prepare(self, size: int) -> int:
        """Rotate if a transaction of `size` bytes would overflow the file; return the offset
        it will start at. With `append_stamped`, lets a caller stamp log_pos/CRC in its own
        rewrite pass so the writer does not touch the bytes again."""
        self._require_open()
        if self._pos + size > self.max_file_size and self._pos > self._header_end:
            self.rotate()
        return self._pos

    def append_stamped(self, buf: bytes | bytearray | memoryview) -> TxnPosition:
        """Append a transaction whose events already carry final log_pos and CRC (stamped for
        the offset `prepare(len(buf))` returned). Checks the first and last event only."""
        self._require_open()
        if self.gtids is not None:
            raise RuntimeError("a GTID-numbered writer stamps its transactions itself")
        start = self._pos
        if len(buf) < HEADER_LEN + CHECKSUM_LEN or log_pos(buf) != start + event_size(buf):
            raise CodecError(
                f"stamped transaction does not start at position {start}; call prepare() first",
                file=self.file,
                pos=start,
            )
        self._check_last(buf, None)
        return self._append(buf, start)

    # ------------------------------------------------------------------ streamed transactions

    def begin_stream(self, size_hint: int) -> int:
        """Start a transaction too large to hold in memory: its events then come in parts
        (`write_part`) and it ends with `end_stream` (or `abort_stream`). Until it ends,
        `visible_end` keeps readers before it; after a crash, recovery truncates it like any
        torn tail. Returns its start offset (rotates first if `size_hint` would overflow)."""
        if self._stream_start is not None:
            raise RuntimeError("a streamed transaction is already open")
        start = self.prepare(size_hint)
        self._stream_start, self._stream_tail = start, b""
        self._stream_gno = self.gno  # the first part stamps the GTID; an abort gives it back
        return start

    def write_part(self, events: Iterable[bytes | bytearray | memoryview]) -> None:
        """Append raw events (any log_pos/CRC: both are stamped here) to the open stream."""
        fd = self._require_open()
        if self._stream_start is None:
            raise RuntimeError("write_part without begin_stream")
        buf = bytearray().join(events)
        if not buf:
            return
        if self.gtids is not None and self._pos == self._stream_start:
            self.gno = self._stamp_gtids(buf, self._gtids_in(buf, 0, len(buf)))
        last = stamp_positions(buf, self._pos)
        self._stream_tail = bytes(buf[last:])
        self._pos += len(buf)
        if self._buffer_size:
            self._pending += buf
            if len(self._pending) >= self._buffer_size:
                self.flush()
        else:
            self._write_all(fd, buf)

    def end_stream(self) -> TxnPosition:
        """The streamed transaction is whole: check its terminator, make it visible."""
        start = self._stream_start
        if start is None:
            raise RuntimeError("end_stream without begin_stream")
        try:
            self._check_last(self._stream_tail, None)
        except (ValueError, CodecError):
            self.abort_stream()
            raise
        self._stream_start = self._stream_gno = None
        if not self._pending:
            self._whole = (self._number, self._pos)
        self._unsynced += 1
        if self.fsync.mode == FsyncMode.TXN or (
            self.fsync.mode != FsyncMode.NEVER and self._sync_due()
        ):
            self.sync()
        return TxnPosition(self._file_name, start, self._pos)

    def abort_stream(self) -> None:
        """Drop the open streamed transaction: the file ends where it began."""
        start = self._stream_start
        if start is None:
            return
        fd = self._require_open()
        self.flush()
        os.ftruncate(fd, start)
        os.lseek(fd, start, os.SEEK_SET)  # writes use the fd's offset: no hole after the cut
        self._pos, self._stream_start = start, None
        if self._stream_gno is not None:
            self.gno, self._stream_gno = self._stream_gno, None

    def abandon(self) -> None:
        """After a write failed (a full disk): close without writing anything more, as a crash
        would, and go back to the end of the last whole transaction known to be in the file,
        so that `position` never names bytes of the failed write. A new writer on the
        directory then cuts the file there (recovery) and appends at that very byte."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._pending = bytearray()
        self._stream_start = self._stream_gno = None
        number, end = self._whole
        if number:
            self._set_number(number)
            self._pos = end

    def _check_last(self, buf: bytes | bytearray | memoryview, last: int | None) -> None:
        """The last event must be the transaction's terminator (walks the headers if the
        caller did not already)."""
        mv = memoryview(buf)
        if last is None:
            last = len(mv) - _last_event_size(mv)
        tail = mv[last:]
        if self._mark_only:
            ok = tail[4] == self._mark_type and is_cts_mark(tail)
        else:
            ok = is_terminator(tail, self.boundary)
        tail.release()
        mv.release()
        if not ok:
            raise ValueError(
                f"a transaction must end with its terminator ({self.boundary.value} rule: "
                + (
                    f"a CTS:: mark in a type {self._mark_type} event"
                    if self._mark_only
                    else "XID, a standalone QUERY or a CTS mark"
                )
                + ")"
            )

    def _append(
        self, buf: bytes | bytearray | memoryview, start: int, txns: int = 1
    ) -> TxnPosition:
        self._pos = end = start + len(buf)
        name = self._file_name
        if (
            self._buffer_size
            and not self._pending
            and len(buf) >= self._buffer_size
            and self._stream_start is None
        ):
            # What the buffered branch would do at once (a full buffer is flushed), without
            # first copying a batch of this size into a fresh buffer.
            self._write_all(self._fd, buf)  # type: ignore[arg-type]
            self._whole = (self._number, end)
            self._unsynced += txns
            if self.fsync.mode != FsyncMode.NEVER:
                self.sync()
        elif self._buffer_size:
            self._pending += buf
            self._unsynced += txns
            if len(self._pending) >= self._buffer_size or (
                self.fsync.mode != FsyncMode.NEVER and self._sync_due()
            ):
                self.flush()
                if self.fsync.mode != FsyncMode.NEVER:
                    self.sync()
        else:
            self._write_all(self._fd, buf)  # type: ignore[arg-type]
            self._whole = (self._number, end)
            self._unsynced += txns
            if self.fsync.mode == FsyncMode.TXN:
                self.sync()
        return TxnPosition(name, start, end)

    def _sync_due(self) -> bool:
        return self.fsync.due(self._unsynced, (time.monotonic() - self._last_sync) * 1000.0)

    @staticmethod
    def _write_all(fd: int, buf: bytes | bytearray | memoryview) -> None:
        n = os.write(fd, buf)
        while n < len(buf):  # short writes are legal for regular files too
            n += os.write(fd, memoryview(buf)[n:])

    def flush(self) -> None:
        """Hand buffered transactions to the OS (no fsync)."""
        if self._pending and self._fd is not None:
            self._write_all(self._fd, self._pending)
            self._pending = bytearray()
            end = self._pos if self._stream_start is None else self._stream_start
            self._whole = (self._number, end)

    def sync(self) -> None:
        """Flush and fsync now, whatever the policy (e.g. from an idle timer)."""
        self.flush()
        if self._fd is not None and self._unsynced:
            t0 = time.monotonic()
            os.fsync(self._fd)
            took = time.monotonic() - t0
            stage_trace.stamp("fsync", int(took * 1e6), t0)
            if self.on_fsync is not None:
                self.on_fsync(took)
            self._unsynced = 0
            self._last_sync = time.monotonic()
            end = self._pos if self._stream_start is None else self._stream_start
            if end > self._header_end:
                self._point.save(self._file_name, end)

    def _require_open(self) -> int:
        if self._fd is None:
            raise RuntimeError("BinlogWriter is closed")
        return self._fd

    # ------------------------------------------------------------------ rotate / close

    def rotate(self) -> str:
        """End the current file with ROTATE (next name, pos 4) and start the next one."""
        fd = self._require_open()
        if self._stream_start is not None:
            raise RuntimeError("cannot rotate inside a streamed transaction")
        nxt = layout.file_name(self.base, self._number + 1)
        self._finish_file(fd, RotateEvent(nxt.encode(), 4))
        self._start_file(self._number + 1)
        return self.file

    def close(self) -> None:
        """Clean shutdown: STOP event, in-use flag cleared, file closed."""
        if self._fd is None:
            return
        self.abort_stream()  # a half-written transaction is not part of the file
        self._finish_file(self._fd, StopEvent())

    def _finish_file(self, fd: int, last: object) -> None:
        self.flush()
        ev = encode_event(last, timestamp=int(self._clock()), server_id=self.server_id, log_pos=0)
        buf = bytearray(ev)
        stamp_positions(buf, self._pos)
        self._write_all(fd, buf)
        self._unsynced = 0
        self._pos += len(buf)
        os.close(fd)
        self._fd = None
        self._clear_in_use(self.path)  # fsyncs the file, which also covers the STOP/ROTATE

    def __enter__(self) -> BinlogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _last_event_size(mv: memoryview) -> int:
    """Size of the last event in a buffer of whole events (walks the headers)."""
    off = 0
    n = len(mv)
    while True:
        if n - off < HEADER_LEN + CHECKSUM_LEN:
            raise CodecError(f"transaction buffer ends with {n - off} stray bytes at offset {off}")
        size = event_size(mv, off)
        if size < HEADER_LEN + CHECKSUM_LEN or off + size > n:
            raise CodecError(f"bad event_size {size} at transaction offset {off}")
        if off + size == n:
            return size
        off += size
