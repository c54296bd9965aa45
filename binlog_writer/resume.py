"""Where a restarted pipeline resumes: the global key of the last complete transaction in the
binlog files. Every transaction ends with a `CTS::` mark (the dumper's encoder writes it), so the
key is read back from the files themselves, never from a side record that could disagree."""

from __future__ import annotations

from binlog_writer.recovery_point import RecoveryPoint, scan_file
from binlog_writer.writer import BinlogWriter
from cdc.binlog.events import parse_cts
from cdc.keys import GlobalKey, Kind


def key_from_mark(mark: bytes) -> GlobalKey:
    """`CTS::<tso>` → (tso, BRANCH, 0, 0); `CTS::<tso>::L<dn>.<seq>` → (tso, LOCAL, dn, seq)."""
    tso = parse_cts(mark)
    if tso is None:
        raise ValueError(f"not a CTS mark: {mark[:60]!r}")
    parts = mark.split(b"::")
    if len(parts) > 2 and parts[2].startswith(b"L"):
        dn, seq = parts[2][1:].split(b".")
        return GlobalKey(tso, Kind.LOCAL, int(dn), int(seq))
    return GlobalKey.branch(tso)


def last_written_key(writer: BinlogWriter) -> GlobalKey | None:
    """The global key of the last complete transaction in the binlog, newest file first."""
    point = RecoveryPoint(writer.dir, writer.base)  # scan only after it (not whole files)
    for name in reversed(writer.files()):
        mark = scan_file(writer.dir / name, point.load(name)).last_mark
        if mark is not None:
            return key_from_mark(mark)
    return None
