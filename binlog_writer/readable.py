"""The files of one global binlog a reader can still read: with an archive directory (`[dumper]
archive_dir`, docs/retention.md) the archived files just before the first live one, then the
live ones of the index. The one lookup of "retained = archive + live" for every reader: the
server's store (`BinlogFiles`, which lists its live directory its own way), points and
flashback (`history`), `cdc locate` (`locate`).

A purge moves a file whole (a rename, or a copy fsynced and renamed before the original is
unlinked): at every moment one of the two places holds it, so a read tries the live directory
first, then the archive. The archived files counted are the run without a gap that ends right
before the first live file: a reader crossing a gap (a file the operator pruned from the middle)
would skip its transactions without noticing."""

from __future__ import annotations

import os
import re
from pathlib import Path

from . import layout

_NAME_RE = re.compile(r"^[^./]+\.\d{6,}$")


def archived_names(archive: Path | None, base: str, live: list[str]) -> list[str]:
    """The archived files older than the first of `live`, oldest first: the gapless run that
    ends right before it (before the newest archived file when nothing is live)."""
    if archive is None:
        return []
    try:
        entries = os.listdir(archive)
    except FileNotFoundError:
        return []
    numbers = {}
    for name in entries:
        if name.startswith(base + ".") and _NAME_RE.match(name):
            numbers[layout.file_number(name)] = name
    if not numbers:
        return []
    nxt = layout.file_number(live[0]) if live else max(numbers) + 1
    run = []
    while nxt - 1 in numbers:
        nxt -= 1
        run.append(numbers[nxt])
    return run[::-1]


def find_file(directory: Path, archive: Path | None, name: str) -> Path | None:
    """Where file `name` is now: live, else archived; None: in neither (live first: the archive
    has the whole file before the live one is unlinked)."""
    live = directory / name
    if live.exists():
        return live
    if archive is not None and (archive / name).exists():
        return archive / name
    return None


class ReadableFiles:
    """`<directory>/<base>.index` and its files, plus the archived ones before them."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        base: str = "binlog",
        archive: str | os.PathLike[str] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.base = base
        self.archive = Path(archive) if archive else None

    def live(self) -> list[str]:
        return layout.read_index(self.directory, self.base)

    def names(self) -> list[str]:
        """Every readable file, oldest first: the archived ones, then the index."""
        live = self.live()
        return archived_names(self.archive, self.base, live) + live

    def is_archived(self, name: str) -> bool:
        return self.archive is not None and not (self.directory / name).exists()

    def path(self, name: str) -> Path:
        """`find_file`, or the live path of a file in neither (which errors then name)."""
        if self.archive is None:
            return self.directory / name
        return find_file(self.directory, self.archive, name) or self.directory / name

    def read_bytes(self, name: str) -> bytes:
        """The file's bytes wherever it is, a move under way included (live first: the archive
        has the whole file before the live one is unlinked)."""
        try:
            return (self.directory / name).read_bytes()
        except FileNotFoundError:
            if self.archive is None:
                raise
        return (self.archive / name).read_bytes()
