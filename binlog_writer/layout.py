"""File layout of the output binlog: names `<base>.NNNNNN`, the index file, and the bytes
every new file starts with (magic, the flavour's FDE with the in-use flag, then the GTIDs
before the file: MySQL's PREVIOUS_GTIDS or MariaDB's GTID_LIST)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path

from cdc.binlog.constants import BINLOG_MAGIC, CHECKSUM_LEN, HEADER_LEN, EventFlag
from cdc.binlog.events import PreviousGtidsEvent, encode_event
from cdc.binlog.fde import DEFAULT_SERVER_VERSION, FormatDescription, mysql57_fde
from cdc.files import write_atomically

_NAME_RE = re.compile(r"^(?P<base>[^.]+)\.(?P<num>\d{6,})$")
# Offset of the FDE's header flags: magic (4) + flags offset in the header (17).
FDE_FLAGS_OFFSET = len(BINLOG_MAGIC) + 17


def file_name(base: str, number: int) -> str:
    return f"{base}.{number:06d}"


def file_number(name: str) -> int:
    m = _NAME_RE.match(os.path.basename(name))
    if not m:
        raise ValueError(f"{name!r} is not a binlog file name (<base>.NNNNNN)")
    return int(m.group("num"))


def check_base(base: str) -> None:
    # Canal splits file names on the first '.', so the base must not contain one.
    if not base or "." in base or "/" in base:
        raise ValueError(f"binlog base name {base!r} must be non-empty, without '.' or '/'")


def index_path(directory: Path, base: str) -> Path:
    return directory / f"{base}.index"


def read_index(directory: Path, base: str) -> list[str]:
    """File names listed in `<base>.index`, in order (MySQL writes `./name` per line)."""
    path = index_path(directory, base)
    if not path.exists():
        return []
    names = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            names.append(os.path.basename(line))
    return names


@contextlib.contextmanager
def index_lock(directory: Path) -> Iterator[None]:
    """Held while the index changes: the writer appends a line (here) while the dumper's server
    process may rewrite it for a PURGE (dumper/server/store/binlog_files.py); without the lock, an
    append to the old index between the purge's read and its rename would be lost. A flock on
    the directory, since the index file itself is replaced."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def append_index(directory: Path, base: str, name: str, *, fsync: bool = True) -> None:
    with index_lock(directory), open(index_path(directory, base), "a") as f:
        f.write(f"./{name}\n")
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def rewrite_index(directory: Path, base: str, names: list[str], *, fsync: bool) -> None:
    """The index replaced whole by `names` (a purge, a copy cut back), never half written; the
    caller holds `index_lock`, so no append falls between its read of the index and this."""
    text = "".join(f"./{n}\n" for n in names)
    write_atomically(index_path(directory, base), text, fsync=fsync)


def file_header(
    *,
    server_id: int,
    timestamp: int,
    server_version: str = DEFAULT_SERVER_VERSION,
    fde: FormatDescription | None = None,
    gtids: object | None = None,
) -> bytes:
    """Magic + FDE (in-use flag set; its CRC is computed as if cleared; default: MySQL 5.7's of
    `server_version`) + the GTIDs of every file before this one (`gtids`, a codec body:
    PREVIOUS_GTIDS or GTID_LIST; default an empty PREVIOUS_GTIDS). With the 5.7 FDE the FDE
    ends at 123; an empty PREVIOUS_GTIDS at 154, one holding `uuid:1-n` at 194. MariaDB 10.11's
    FDE ends at 256."""
    fde = fde or mysql57_fde(server_version)
    fde_size = HEADER_LEN + len(fde.build()) + CHECKSUM_LEN
    fde_event = encode_event(
        fde,
        timestamp=timestamp,
        server_id=server_id,
        log_pos=len(BINLOG_MAGIC) + fde_size,
        flags=EventFlag.BINLOG_IN_USE,
    )
    head = BINLOG_MAGIC + fde_event
    gtids = gtids if gtids is not None else PreviousGtidsEvent()
    size = HEADER_LEN + len(gtids.build()) + CHECKSUM_LEN  # type: ignore[attr-defined]
    prev = encode_event(gtids, timestamp=timestamp, server_id=server_id, log_pos=len(head) + size)
    return head + prev


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
