"""The copies an HA dumper keeps of the global binlog: the single one in its binlog directory,
or one per stream (`<binlog_dir>/stream<i>`); how far each reaches; and which term's stream
each is a prefix of (`ha-state.json`).

Copies of different terms: each new term records where it began (`binlog_dumper_term`; with
several streams each stream's process records it in its stream, `binlog_dumper_stream_term`).
A copy that holds bytes of an older term past that point (it followed the old leader further
than the new leader had copied) is cut back to it before it follows the new leader."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from binlog_writer import layout, truncate_copy
from cdc.config import DumperConfig
from cdc.files import write_atomically
from cdc.streams import stream_dir
from dumper.ha.deps import LeaseStore
from dumper.ha.election import order
from dumper.ha.stream_tail import stream_port_address
from topology import Lease, TermStart

log = logging.getLogger(__name__)

STATE_FILE = "ha-state.json"  # the term whose stream this copy is a prefix of


@dataclass(frozen=True, slots=True)
class CopyTarget:
    """One copy this process keeps: the single global binlog (`stream` None) or one stream of
    a multi-stream binlog."""

    stream: int | None
    dir: Path

    def leader_address(self, lease: Lease) -> str:
        """Where the leader serves what this copy follows: its port, or its stream's port
        (port + 1 + stream: `[dumper] stream_port` is 0 with peers, cdc/config.py)."""
        if self.stream is None:
            return lease.address
        return stream_port_address(lease.address, self.stream)


def copy_targets(d: DumperConfig) -> list[CopyTarget]:
    """The copies a follower of dumper config `d` keeps (and a re-seed replaces): the global
    binlog in its binlog directory, or one per stream in `<binlog_dir>/stream<i>`."""
    if d.streams > 1:
        return [CopyTarget(i, stream_dir(d, i)) for i in range(d.streams)]
    return [CopyTarget(None, Path(d.binlog_dir))]


def copy_ends(copies: list[CopyTarget], base: str) -> list[tuple[str, int]]:
    """How far each copy reaches (one: the single global binlog)."""
    return [end_of(c, base) for c in copies]


def end_of(copy: CopyTarget, base: str) -> tuple[str, int]:
    """How far `copy` reaches: its last file and that file's size ("", 0: no file)."""
    names = layout.read_index(copy.dir, base)
    if not names:
        return "", 0
    path = copy.dir / names[-1]
    return names[-1], path.stat().st_size if path.exists() else 0


async def align_copy(d: DumperConfig, store: LeaseStore, copy: CopyTarget, upto: int) -> bool:
    """Cut `copy` back to the start of every recorded term after the one it was copied from,
    up to `upto`. Returns whether term `upto` has recorded its start in the copy's stream (a
    term that never did wrote nothing)."""
    state = read_state_term(copy.dir)
    if state >= upto:
        # Already a prefix of that term's stream: a follower restarted (or re-seeded, or
        # whose dump broke) within the term copies on (terms_after(state) lacks `upto`).
        return True
    terms = await store.terms_after(state, copy.stream)
    terms = [t for t in terms if t.term <= upto]
    if terms:
        first = min(terms, key=lambda t: order(t.file, t.position))
        await asyncio.to_thread(_cut_copy, d, copy, first)
    recorded = any(t.term == upto for t in terms)
    if recorded:
        save_state_term(copy.dir, upto)
    return recorded


def _cut_copy(d: DumperConfig, copy: CopyTarget, start: TermStart) -> None:
    end = order(*end_of(copy, d.binlog_base))
    if end > order(start.file, start.position) and truncate_copy(
        copy.dir, d.binlog_base, start.file, start.position
    ):
        log.warning(
            "dumper %d: cut the copy in %s back to %s:%d where term %d began",
            d.id,
            copy.dir,
            start.file,
            start.position,
            start.term,
        )


def read_state_term(directory: Path) -> int:
    """The term whose stream the copy in `directory` is a prefix of (0: none recorded)."""
    try:
        return int(json.loads((directory / STATE_FILE).read_text())["term"])
    except (OSError, ValueError, KeyError):
        return 0


def save_state_term(directory: Path, term: int) -> None:
    """Record that the copy in `directory` is a prefix of term `term`'s stream."""
    write_atomically(directory / STATE_FILE, json.dumps({"term": term}))
