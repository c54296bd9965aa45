"""Small files that readers see whole: written next to their place and renamed over it."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str, *, fsync: bool = False) -> None:
    """`path` holds `text`, or what it held before, never a part of either: `text` goes to
    `path.tmp`, which is renamed over `path`. With `fsync` the text is on disk before the
    rename (a crash right after it cannot leave an empty file); without, a crash may lose
    the last write, which suits a file written again every second anyway. Raises OSError
    (a full disk) with `path` untouched."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    tmp.replace(path)
