"""The ground-truth log's reader (its writer is the protocol's: `cdc.cn_protocol.ground_truth`):
what the checks, `cdc verify-binlog`, the benches and the tests compare the global binlog with."""

from __future__ import annotations

import json
from pathlib import Path


def read(path: str | Path) -> list[dict]:
    """All entries, one per txn_id (a recovered duplicate of a logged commit is dropped)."""
    seen: dict[int, dict] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            seen.setdefault(entry["txn_id"], entry)
    return sorted(seen.values(), key=lambda e: e["tso"])
