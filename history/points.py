"""A point of the global binlog: a transaction boundary, named by a commit TSO, a time, a GTID or
a file position, and resolved against the served files to all four (file, pos, gtid, tso).

A point is a *state*: the state after the last transaction at or before what it names.
- `TSO n`: after the last transaction whose commit TSO is <= n;
- `TIMESTAMP 'YYYY-mm-dd HH:MM:SS[.ffffff]'` (the machine's local time zone): after the last
  transaction committed at or before it (its commit TSO's physical milliseconds,
  `cdc.tso_layout`, at or before the time);
- `GTID 'uuid:n'` / `GTID 'domain-server-n'` (the keyword may be left out): after transaction n
  (as `START SLAVE UNTIL master_gtid_pos` stops after it);
- `'file':pos` (quotes optional): that position, which must be a transaction boundary.

The commit TSO of a transaction is in the files themselves: every transaction ends with its CTS
mark `CTS::<tso>` (a ROWS_QUERY, or a BINLOG_CHECKPOINT in the mariadb flavour; docs/codec.md),
so no index outside the files is needed (`binlog_writer.locate` reads them).

Errors are `PointError`s, one class per reason, each saying what to write instead.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from binlog_writer import ReadableFiles, layout, locate
from cdc import tso_layout
from cdc.binlog.errors import CodecError
from cdc.binlog.gtid import parse_gtid

FORMS = (
    "TSO n, TIMESTAMP 'YYYY-mm-dd HH:MM:SS[.ffffff]', GTID 'uuid:n' (or 'domain-server-n'), "
    "'file':pos"
)


class PointError(ValueError):
    """A point that names no transaction boundary of the served global binlog."""


class MalformedPoint(PointError):
    pass


class AmbiguousPoint(PointError):
    pass


class PointInsideTransaction(PointError):
    pass


class PointBeforeOldest(PointError):
    pass


class PointInFuture(PointError):
    pass


class PointNotFound(PointError):
    pass


@dataclass(frozen=True, slots=True)
class PointSpec:
    """A point as written: `kind` is tso, time, gtid or position."""

    kind: str
    value: object  # int (tso), datetime (time), str (gtid), (file, pos) (position)
    text: str


@dataclass(frozen=True, slots=True)
class Point:
    """A transaction boundary: the next transaction starts at `file:pos`; `gtid` and `tso` are
    the last transaction's before it (None at the start of the binlog)."""

    file: str
    pos: int
    gtid: str | None
    tso: int | None

    def __str__(self) -> str:
        return f"'{self.file}':{self.pos} (gtid {self.gtid or '-'}, tso {self.tso or '-'})"


_TSO = re.compile(r"^TSO\s+(\d+)$", re.I)
_TIME = re.compile(r"^TIMESTAMP\s+'([^']*)'$", re.I)
_GTID = re.compile(r"^GTID\s+'?([^']*)'?$", re.I)
_MYSQL_GTID = re.compile(r"^[0-9a-fA-F-]{32,36}:\d+$")
_MARIADB_GTID = re.compile(r"^\d+-\d+-\d+$")
_POSITION = re.compile(r"^'?([^':\s]+)'?:(\d+)$")


def parse_point(text: str) -> PointSpec:
    """The spelling of a point, checked (nothing is read)."""
    s = text.strip()
    if m := _TSO.match(s):
        return PointSpec("tso", int(m.group(1)), s)
    if m := _TIME.match(s):
        return PointSpec("time", _parse_time(m.group(1), s), s)
    if m := _GTID.match(s):
        return PointSpec("gtid", _checked_gtid(m.group(1).strip(), s), s)
    if _MYSQL_GTID.match(s) or _MARIADB_GTID.match(s):
        return PointSpec("gtid", _checked_gtid(s, s), s)
    if m := _POSITION.match(s):
        try:
            layout.file_number(m.group(1))
        except ValueError:
            raise MalformedPoint(
                f"point {s!r}: {m.group(1)!r} is not a binlog file name (<base>.NNNNNN)"
            ) from None
        return PointSpec("position", (m.group(1), int(m.group(2))), s)
    if s.isdigit():
        raise AmbiguousPoint(
            f"point {s!r} is ambiguous: write TSO {s} for a commit TSO, or 'file':{s} for a "
            "position"
        )
    raise MalformedPoint(f"point {s!r} is malformed; write one of: {FORMS}")


def _parse_time(value: str, text: str) -> dt.datetime:
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return dt.datetime.strptime(value.strip(), fmt).astimezone()  # local time zone
        except ValueError:
            continue
    raise MalformedPoint(f"point {text!r}: the time must be 'YYYY-mm-dd HH:MM:SS[.ffffff]'")


def _checked_gtid(value: str, text: str) -> str:
    if _MARIADB_GTID.match(value):
        return value
    try:
        parse_gtid(value)
    except CodecError:
        raise MalformedPoint(
            f"point {text!r}: a GTID is uuid:n or domain-server-n (as SHOW MASTER STATUS and "
            "@@gtid_binlog_pos give them)"
        ) from None
    return value


def gno_of(gtid: str) -> int:
    """The transaction number of a served GTID (both flavours number transactions 1, 2, …)."""
    return int(re.split(r"[:-]", gtid)[-1])


def time_bound(when: dt.datetime) -> int:
    """The largest TSO taken at or before `when` (a TSO's physical part is milliseconds)."""
    ms = int(when.timestamp() * 1000)  # floor: a TSO in the same ms is at or before `when`
    return tso_layout.compose(ms, tso_layout.LOGICAL_MASK)


class RetainedFiles:
    """The global binlog's files still readable (a dumper's `binlog_dir`, or an HA copy, and
    with `archive` the archived files before them: `binlog_writer.readable`), read as
    `binlog_writer.locate` walks them: Python, a few seconds for a 512 MB file, a tool's cost
    (a server resolving points would run it off its event loop)."""

    def __init__(self, directory: Path, base: str = "binlog", archive: Path | None = None) -> None:
        self.readable = ReadableFiles(directory, base, archive)
        self.directory = self.readable.directory
        self.base = base
        self.archive = self.readable.archive
        self.names = self.readable.names()
        if not self.names:
            raise PointNotFound(f"no global binlog in {self.directory} ({base}.index is empty)")

    def transactions(self, name: str, start: int = 4):
        return locate.transactions_in(self.readable.read_bytes(name), name, start)

    def read_bytes(self, name: str) -> bytes:
        return self.readable.read_bytes(name)

    def oldest_file(self) -> str:
        """The oldest file, said with where it is when it is archived (for errors)."""
        name = self.names[0]
        if self.readable.is_archived(name):
            return f"{name} (archived in {self.archive})"
        return name

    def purged(self) -> bool:
        """Whether files before the oldest one listed were removed."""
        return layout.file_number(self.names[0]) > 1

    def first_txn(self, name: str) -> locate.Located | None:
        return next(self.transactions(name), None)

    def last_txn(self, name: str) -> locate.Located | None:
        last = None
        for last in self.transactions(name):  # noqa: B007
            pass
        return last

    def newest(self) -> locate.Located | None:
        for name in reversed(self.names):
            if (txn := self.last_txn(name)) is not None:
                return txn
        return None

    def end_point(self) -> Point:
        """The state after the newest whole transaction written."""
        newest = self.newest()
        if newest is None:
            return self.oldest_point()
        return self.before(newest.file, newest, newest.end)

    def oldest_point(self) -> Point:
        """The oldest state the files can give: before the oldest file's first transaction."""
        first = self.first_txn(self.names[0])
        pos = first.position if first is not None else 4
        if not self.purged():
            return Point(self.names[0], pos, None, None)
        gtid = None
        if first is not None and first.gtids:
            g = first.gtids[0]
            gtid = re.sub(r"\d+$", str(gno_of(g) - 1), g)
        return Point(self.names[0], pos, gtid, None)

    def before(self, name: str, txn: locate.Located | None, pos: int) -> Point:
        """The boundary at `name:pos`, `txn` the transaction ending there (None: the file's
        start; then the last transaction of the file before, if listed)."""
        if txn is None:
            i = self.names.index(name)
            prev = self.last_txn(self.names[i - 1]) if i > 0 else None
            if prev is None:
                return self.oldest_point() if i == 0 else Point(name, pos, None, None)
            txn = prev
        return Point(name, pos, txn.gtids[-1] if txn.gtids else None, txn.tso)


def resolve(
    spec: PointSpec | str, files: RetainedFiles, *, now: dt.datetime | None = None
) -> Point:
    """The boundary `spec` names in `files`; a PointError says why there is none."""
    if isinstance(spec, str):
        spec = parse_point(spec)
    if spec.kind == "position":
        return _by_position(spec, files)
    if spec.kind == "gtid":
        return _by_gtid(spec, files)
    now = now or dt.datetime.now().astimezone()
    if spec.kind == "time":
        if spec.value > now:
            raise PointInFuture(f"point {spec.text!r} is in the future (now is {now:%F %T})")
        return _by_tso(spec, files, time_bound(spec.value))
    if tso_layout.physical_ms(spec.value) > now.timestamp() * 1000:
        raise PointInFuture(f"point {spec.text!r} is in the future (a TSO of {now:%F %T} is less)")
    return _by_tso(spec, files, spec.value)


def _by_tso(spec: PointSpec, files: RetainedFiles, tso: int) -> Point:
    names = files.names
    start = None  # the last file whose first transaction is at or below tso
    for i in range(len(names) - 1, -1, -1):
        head = files.first_txn(names[i])
        if head is not None and head.tso <= tso:
            start = i
            break
    if start is None:
        if files.purged():
            raise PointBeforeOldest(
                f"point {spec.text!r} is before the oldest retained file {files.oldest_file()}: "
                f"the oldest readable point is {files.oldest_point()}"
            )
        return files.oldest_point()  # before every transaction: the binlog's start
    last = None
    for name in names[start:]:
        for txn in files.transactions(name):
            if txn.tso > tso:
                return files.before(last.file, last, last.end)
            last = txn
    newest = files.newest()
    assert newest is not None
    if newest.tso < tso:
        raise PointInFuture(
            f"point {spec.text!r} is after the newest transaction written (TSO {newest.tso} at "
            f"'{newest.file}':{newest.position}): transactions at or before it may still be "
            "arriving; name that one or an earlier point"
        )
    return files.before(newest.file, newest, newest.end)


def _by_gtid(spec: PointSpec, files: RetainedFiles) -> Point:
    text, gno = spec.value, gno_of(spec.value)
    oldest = files.oldest_point()
    if files.purged() and oldest.gtid is not None:
        first = gno_of(oldest.gtid)
        if gno < first:
            raise PointBeforeOldest(
                f"point {spec.text!r} is before the oldest retained file {files.oldest_file()}: "
                f"the oldest readable point is {oldest}"
            )
        if gno == first and text == oldest.gtid:
            return oldest
    try:
        txn = locate.by_gtid_text(files.directory, files.base, text, files.archive)
    except (locate.LocateError, CodecError):
        newest = files.newest()
        if newest is not None and newest.gtids and gno > gno_of(newest.gtids[-1]):
            raise PointInFuture(
                f"point {spec.text!r} is not written yet: the newest transaction is GTID "
                f"{newest.gtids[-1]} at '{newest.file}':{newest.position}"
            ) from None
        span = (
            f"{files.oldest_point().gtid or 'the start'} to {newest.gtids[-1] if newest else '-'}"
        )
        raise PointNotFound(
            f"point {spec.text!r}: no transaction of the global binlog has that GTID (its "
            f"GTIDs go from {span})"
        ) from None
    return files.before(txn.file, txn, txn.end)


def _by_position(spec: PointSpec, files: RetainedFiles) -> Point:
    name, pos = spec.value
    if name not in files.names:
        number, oldest = layout.file_number(name), layout.file_number(files.names[0])
        if number < oldest:
            raise PointBeforeOldest(
                f"point {spec.text!r}: {name} was purged; the oldest readable point is "
                f"{files.oldest_point()}, in {files.oldest_file()}"
            )
        if number > layout.file_number(files.names[-1]):
            raise PointInFuture(f"point {spec.text!r}: {name} is not written yet")
        where = f"{files.base}.index" + (" nor archived" if files.archive else "")
        raise PointNotFound(f"point {spec.text!r}: {name} is not in {where}")
    last = None
    for txn in files.transactions(name):
        if pos == txn.position or (last is None and pos < txn.position):
            return files.before(name, last, txn.position)  # a file's header: its first start
        if pos < txn.end:
            raise PointInsideTransaction(
                f"point {spec.text!r} is inside the transaction at '{name}':{txn.position} "
                f"(GTID {','.join(txn.gtids) or '-'}, TSO {txn.tso}), which ends at {txn.end}: "
                f"name '{name}':{txn.position} (before it) or '{name}':{txn.end} (after it)"
            )
        last = txn
    if last is not None and pos == last.end:
        return files.before(name, last, pos)
    if last is None and pos == 4:
        return files.before(name, None, 4)
    end = last.end if last is not None else 4
    raise PointInFuture(
        f"point {spec.text!r} is past the last whole transaction of {name}, which ends at {end}"
    )
