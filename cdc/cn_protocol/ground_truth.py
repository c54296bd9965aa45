"""The ground-truth log for tests: one JSON line per committed transaction of the protocol,
written when `[cn] ground_truth_log` is set (the Dumper's heartbeat and recovery write there too,
so it stays with the protocol; the reader is test equipment: `cdc_equipment.ground_truth`)."""

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
