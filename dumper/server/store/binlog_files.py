"""The served binlog directory: the index file, file sizes, event-boundary walks (cached per file,
incremental as the active file grows), event iteration for SHOW BINLOG EVENTS, and purge; with
an archive directory, purged files move there and stay readable (`locate`, `readable_names`:
docs/retention.md, "Archive")."""

from __future__ import annotations

import os
import re
import shutil
import struct
import time
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from binlog_writer import archived_names, find_file, layout
from cdc.binlog.constants import FORMAT_DESCRIPTION_EVENT, HEADER_LEN
from cdc.binlog.header import OFF_FLAGS, OFF_SERVER_ID, event_size, log_pos
from cdc.config import ConfigError

MAGIC = b"\xfebin"
START = len(MAGIC)  # offset of the first event (the FDE)
_NAME_RE = re.compile(r"^[^./]+\.\d{6,}$")
_SCAN_CHUNK = 1 << 20


class BinlogFileError(RuntimeError):
    """A served binlog file is missing or malformed; the message names file and offset."""


@dataclass(slots=True, frozen=True)
class BinlogFile:
    name: str
    size: int


@dataclass(slots=True, frozen=True)
class RawEvent:
    pos: int  # start offset in its file
    data: bytes  # header + body (+ CRC)

    @property
    def type_code(self) -> int:
        return self.data[4]

    @property
    def server_id(self) -> int:
        return struct.unpack_from("<I", self.data, OFF_SERVER_ID)[0]

    @property
    def log_pos(self) -> int:
        return log_pos(self.data)

    @property
    def flags(self) -> int:
        return struct.unpack_from("<H", self.data, OFF_FLAGS)[0]


@dataclass(slots=True)
class _Scan:
    """Event start offsets of one file, scanned up to `end` (the end of the last whole event)."""

    ino: int
    offsets: array = field(default_factory=lambda: array("Q"))
    end: int = len(MAGIC)
    bad: str = ""  # non-empty once a header made no sense: the walk stops there


class BinlogFiles:
    """Read-only view of `<dir>/<base>.index` and its files, plus `purge_*`.

    The index is re-read on every call (it is tiny) so a concurrent writer's rotations are seen
    at once; the boundary cache is kept per file and extended as files grow. `archive`: where
    purged files go (None: they are deleted); every read below finds a file there too.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        base: str = "binlog",
        archive: str | os.PathLike[str] | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.base = base
        self.archive = Path(archive) if archive else None
        self._scans: dict[str, _Scan] = {}

    @property
    def index_path(self) -> Path:
        return self.dir / f"{self.base}.index"

    def names(self) -> list[str]:
        """File names in index order; without an index, the `<base>.NNNNNN` files sorted."""
        try:
            text = self.index_path.read_text()
        except FileNotFoundError:
            return sorted(
                p.name
                for p in self.dir.glob(f"{self.base}.*")
                if _NAME_RE.match(p.name) and p.suffix != ".index"
            )
        return [os.path.basename(line.strip()) for line in text.splitlines() if line.strip()]

    def archived_names(self) -> list[str]:
        """The archived files older than the first live one, oldest first, without a gap (a
        file whose move is under way is still live): `binlog_writer.archived_names`."""
        return archived_names(self.archive, self.base, self.names())

    def readable_names(self) -> list[str]:
        """Every file a dump can still read: the archived ones, then the index."""
        return self.archived_names() + self.names()

    def readable(self) -> ReadableView:
        """These files as a read as of a point scans them: every readable file."""
        return ReadableView(self)

    def resolve(self, name: str, archived: bool = False) -> str | None:
        """The index entry a client means by `name` (a path or trailing NUL is tolerated);
        `archived`: an archived file's name too."""
        base = os.path.basename(name.rstrip("\0"))
        names = self.readable_names() if archived else self.names()
        return base if base in names else None

    def locate(self, name: str) -> Path | None:
        """Where file `name` is: in the live directory, else in the archive; None: neither."""
        return find_file(self.dir, self.archive, name)

    def path(self, name: str) -> Path:
        """`locate`, or the live path of a missing file (which errors then name)."""
        if self.archive is None:
            return self.dir / name
        return self.locate(name) or self.dir / name

    def size(self, name: str) -> int:
        try:
            return self.path(name).stat().st_size
        except FileNotFoundError:
            raise BinlogFileError(f"{name} is listed in {self.index_path} but missing") from None

    def files(self) -> list[BinlogFile]:
        return self._sized(self.names())

    def readable_files(self) -> list[BinlogFile]:
        """`files()` with the archived ones first."""
        return self._sized(self.readable_names())

    def _sized(self, names: list[str]) -> list[BinlogFile]:
        out = []
        for name in names:
            try:
                out.append(BinlogFile(name, self.size(name)))
            except BinlogFileError:
                continue  # purged underneath us
        return out

    # -- event boundaries --------------------------------------------------------------------
    def _scan(self, name: str) -> _Scan:
        path = self.path(name)
        try:
            st = path.stat()
        except FileNotFoundError:
            raise BinlogFileError(f"{name} is listed in {self.index_path} but missing") from None
        scan = self._scans.get(name)
        if scan is None or scan.ino != st.st_ino or st.st_size < scan.end:
            scan = self._scans[name] = _Scan(ino=st.st_ino)  # new or truncated: rescan
        if scan.bad or st.st_size - scan.end < HEADER_LEN:
            return scan
        with open(path, "rb") as f:
            if scan.end == len(MAGIC) and f.read(4) != MAGIC:
                scan.bad = f"{name} does not start with the binlog magic bytes"
                return scan
            while not scan.bad:
                f.seek(scan.end)
                chunk = f.read(_SCAN_CHUNK)
                pos, advanced = 0, False
                while len(chunk) - pos >= HEADER_LEN:
                    size = event_size(chunk, pos)
                    if size < HEADER_LEN:
                        scan.bad = f"bogus event size {size} at {name}:{scan.end + pos}"
                        break
                    if scan.end + pos + size > st.st_size:
                        break
                    scan.offsets.append(scan.end + pos)
                    pos += size
                    advanced = True
                    if pos > len(chunk):  # an event longer than the chunk: seek past it
                        break
                scan.end += pos
                if not advanced or len(chunk) < _SCAN_CHUNK:
                    break
        return scan

    def complete_end(self, name: str) -> int:
        """End offset of the last whole event (a half-written tail is not counted)."""
        return self._scan(name).end

    def boundary_neighbours(self, name: str, pos: int) -> tuple[bool, int, int]:
        """(pos is an event start or the end of the last whole event, previous start, next start)."""
        scan = self._scan(name)
        if pos == scan.end:
            return True, pos, pos
        i = bisect_left(scan.offsets, pos)
        if i < len(scan.offsets) and scan.offsets[i] == pos:
            return True, pos, pos
        prev = scan.offsets[i - 1] if i else len(MAGIC)
        nxt = scan.offsets[i] if i < len(scan.offsets) else scan.end
        return False, prev, nxt

    def events(self, name: str, start: int = len(MAGIC)) -> Iterator[RawEvent]:
        """Whole events from `start` (an event boundary) to the last whole event. Reads as it
        goes, without walking the file's boundaries first (`_scan`: one go over the whole
        file, which SHOW BINLOG EVENTS of a 512 MB file must not do in one loop turn); a bogus
        size ends it, as it ends the walk."""
        with open(self.path(name), "rb") as f:
            end = os.fstat(f.fileno()).st_size
            f.seek(start)
            pos = start
            while pos + HEADER_LEN <= end:
                head = f.read(HEADER_LEN)
                size = event_size(head)
                if size < HEADER_LEN or pos + size > end:
                    return
                data = head + f.read(size - HEADER_LEN)
                yield RawEvent(pos, data)
                pos += size

    def read_event(self, name: str, pos: int) -> RawEvent:
        with open(self.path(name), "rb") as f:
            f.seek(pos)
            head = f.read(HEADER_LEN)
            if len(head) < HEADER_LEN:
                raise BinlogFileError(f"no event header at {name}:{pos}")
            size = event_size(head)
            body = f.read(max(0, size - HEADER_LEN))
            if size < HEADER_LEN or len(body) != size - HEADER_LEN:
                raise BinlogFileError(f"truncated event at {name}:{pos}")
            return RawEvent(pos, head + body)

    def read_fde(self, name: str) -> RawEvent:
        event = self.read_event(name, len(MAGIC))
        if event.type_code != FORMAT_DESCRIPTION_EVENT:
            raise BinlogFileError(
                f"{name}: first event is type {event.type_code}, not FORMAT_DESCRIPTION"
            )
        return event

    # -- purge -------------------------------------------------------------------------------
    # What to purge is chosen in two steps: the victims a statement or the retention policy
    # names (`victims_*`), cut at the first file a consumer still reads (`dumper/server/
    # retention.py`), then `purge`.
    def victims_to(self, name: str) -> list[str]:
        """Every file listed before `name` (not `name` itself), like MySQL's PURGE ... TO."""
        names = self.names()
        if name not in names:
            raise BinlogFileError(f"Target log '{name}' not found in binlog index")
        return names[: names.index(name)]

    def victims_before(self, when: float) -> list[str]:
        """The oldest files last modified before `when` (epoch s); never the active (last) one."""
        victims = []
        for n in self.names()[:-1]:
            try:
                if self.path(n).stat().st_mtime >= when:
                    break
            except FileNotFoundError:
                pass
            victims.append(n)
        return victims

    def purge(self, victims: list[str]) -> list[str]:
        """Delete `victims` (a prefix of the index; never its last file), or move them to the
        archive, and drop them from the index."""
        if not victims:
            return []
        with layout.index_lock(self.dir):  # the writer appends to the index under it too
            names = self.names()
            gone = set(victims) & set(names[:-1])
            # Rewrite the index first (atomically) so no client is sent to a deleted file.
            layout.rewrite_index(
                self.dir, self.base, [n for n in names if n not in gone], fsync=False
            )
        for n in victims:
            if n in gone:
                if self.archive is not None:
                    archive_file(self.dir / n, self.archive)
                else:
                    (self.dir / n).unlink(missing_ok=True)
                self._scans.pop(n, None)
        return [n for n in victims if n in gone]


class ReadableView:
    """`BinlogFiles` whose `names()` are every readable file, archived ones first: what the read
    path (`read_path.ServedFiles`) scans from a position, so that a read as of a point in an
    archived file crosses into the live ones."""

    __slots__ = ("files",)

    def __init__(self, files: BinlogFiles) -> None:
        self.files = files

    def names(self) -> list[str]:
        return self.files.readable_names()

    def events(self, name: str, start: int = START) -> Iterator[RawEvent]:
        return self.files.events(name, start)

    def read_fde(self, name: str) -> RawEvent:
        return self.files.read_fde(name)


def archive_file(path: Path, archive: Path) -> None:
    """Move `path` into `archive` so that at every moment one whole copy is readable at the
    name (`BinlogFiles.locate` looks in the live directory first): a rename on the same disk;
    else a copy under a temporary name, fsynced, renamed, then the original unlinked."""
    target = archive / path.name
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return
    except OSError:  # another file system (EXDEV)
        tmp = archive / f".{path.name}.part"
        with open(path, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, target)
        layout.fsync_dir(archive)
        path.unlink(missing_ok=True)


def check_archive(archive: str | os.PathLike[str]) -> Path:
    """The archive directory, created if need be; an error naming it if it cannot be written
    (a start-up check: a purge must not find out)."""
    path = Path(archive)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".cdc-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"[dumper] archive_dir = {str(archive)!r} is not a writable directory: {exc}"
        ) from None
    return path


def parse_purge_date(text: str) -> float:
    """'YYYY-MM-DD[ HH:MM:SS]' in local time (as MySQL reads it) to epoch seconds."""
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return time.mktime(time.strptime(text.strip(), fmt))
        except ValueError:
            continue
    raise ValueError(f"not a date: {text!r}")


def fde_checksum_alg(fde: bytes) -> int:
    """Checksum algorithm an FDE declares (0 off, 1 CRC32); pre-5.6.1 servers wrote none."""
    version = fde[HEADER_LEN + 2 : HEADER_LEN + 52].split(b"\0", 1)[0]
    m = re.match(rb"(\d+)\.(\d+)\.(\d+)", version)
    if m and tuple(int(x) for x in m.groups()) < (5, 6, 1):
        return 0
    return fde[-5] if len(fde) >= HEADER_LEN + 57 + 5 else 0


def fde_server_version(fde: bytes) -> str:
    return fde[HEADER_LEN + 2 : HEADER_LEN + 52].split(b"\0", 1)[0].decode("ascii", "replace")
