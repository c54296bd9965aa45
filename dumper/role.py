"""What a dumper process runs, as `dumper.service.serve` sees it (`Role`): a plain leader, an
HA node, the merge process of a multi-stream binlog, or one stream's process."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlog_writer import BinlogWriter
from dumper.server import AckGate


def _writer_end(writer: BinlogWriter) -> tuple[str, int]:
    """How far the server process may serve the writer's file: its end, or the start of a
    transaction still being streamed into it."""
    end = writer.visible_end(writer.file)
    return writer.file, writer.position if end is None else end


@dataclass(slots=True)
class Role:
    """What this process runs (a plain leader, an HA node, a multi-stream merge or one of its
    streams), as the rest of `serve` sees it:
    its tasks (by name), its status, where its binlog is, its writer (None while an HA node
    follows), and what the protocol server reads of it. The defaults are the plain leader's."""

    tasks: dict[str, Callable[[], Coroutine[Any, Any, None]]]
    status: Callable[[], dict]
    binlog_dir: Callable[[], Path]
    writer: Callable[[], BinlogWriter | None]
    current_notify: Callable[[], asyncio.Event]
    leading: Callable[[], bool] = lambda: True
    read_only: Callable[[], bool] = lambda: False
    term: Callable[[], int] = lambda: 0
    sure_until: Callable[[], float] = lambda: math.inf  # HA: `HaNode.sure_until`
    acks: AckGate | None = None
    merged_tso: Callable[[], int] = lambda: 0

    def visible_end(self, name: str) -> int | None:
        writer = self.writer()
        return writer.visible_end(name) if writer is not None else None

    def writer_end(self) -> tuple[str, int] | None:
        writer = self.writer()
        return _writer_end(writer) if writer is not None else None
