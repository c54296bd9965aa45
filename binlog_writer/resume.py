"""Where a restarted pipeline resumes: the global key of the last complete transaction in the
binlog files. Every transaction ends with a `CTS::` mark (the dumper's encoder writes it), so the
key is read back from the files themselves, never from a side record that could disagree."""

from __future__ import annotations

from pathlib import Path

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
    found = _last_mark(writer.dir, writer.base, writer.files())
    return key_from_mark(found[1]) if found is not None else None


def resume_file(
    directory: Path, base: str, names: list[str], known: dict[tuple, bool] | None = None
) -> str | None:
    """The newest of `names` (index order) holding a whole transaction: where a restart (or an
    HA takeover) reads the key it resumes after. Retention keeps it: without it the key would
    be lost and the pipeline would read every DN again from its first binlog. `known` keeps
    what was found per file (name, size, mtime) between calls: a finished file without a
    transaction is not scanned again while it stays so."""
    point = RecoveryPoint(directory, base)
    for name in reversed(names):
        st = (directory / name).stat()
        key = (name, st.st_size, st.st_mtime_ns)
        has = known.get(key) if known is not None else None
        if has is None:
            has = scan_file(directory / name, point.load(name)).last_mark is not None
            if known is not None:  # one entry per file: the active one grows
                for stale in [k for k in known if k[0] == name]:
                    del known[stale]
                known[key] = has
        if has:
            return name
    return None


def _last_mark(directory: Path, base: str, names: list[str]) -> tuple[str, bytes] | None:
    point = RecoveryPoint(directory, base)  # scan only after it (not whole files)
    for name in reversed(names):
        mark = scan_file(directory / name, point.load(name)).last_mark
        if mark is not None:
            return name, mark
    return None
