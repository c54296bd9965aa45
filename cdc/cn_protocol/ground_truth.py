"""The ground-truth log for tests: one JSON line per committed CN transaction."""

from __future__ import annotations

import json
import os
from pathlib import Path


class GroundTruthLog:
    """Appends `{"tso", "txn_id", "participants", "kind", "recovered"}` lines (O_APPEND, one
    write per line, so several CN processes may share the file)."""

    def __init__(self, path: str | Path | None):
        self._fd = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @property
    def enabled(self) -> bool:
        return self._fd is not None

    def record(
        self,
        tso: int,
        txn_id: int,
        participants: list[int],
        kind: str = "txn",
        recovered: bool = False,
    ) -> None:
        if self._fd is None:
            return
        line = json.dumps(
            {
                "tso": tso,
                "txn_id": txn_id,
                "participants": participants,
                "kind": kind,
                "recovered": recovered,
            }
        )
        os.write(self._fd, (line + "\n").encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read(path: str | Path) -> list[dict]:
    """All entries, one per txn_id (a recovered duplicate of a logged commit is dropped)."""
    seen: dict[int, dict] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            seen.setdefault(entry["txn_id"], entry)
    return sorted(seen.values(), key=lambda e: e["tso"])
