"""Retention (docs/dumper.md "Retention"): which binlog files may go, and the task that purges
them automatically (`[dumper] expire_logs_seconds`, `max_binlog_total_size`).

One rule for automatic purges and `PURGE BINARY LOGS`: a file is never purged while someone
still needs it — a connected dump that reads it or an earlier file, a live HA follower whose
acknowledged copy ends in it or earlier (its dump may be reconnecting), a connection that set
`@cdc_retain_from` to it or an earlier file (the backfill holds its hand-off position so), or a
snapshot read's position: a transaction's pinned one, or a running SELECT's (each statement
scans the binlog from there; docs/snapshot-reads.md). Purges
stop at the first such file; the others wait until their readers pass it. It runs in the server
process, which owns the sessions, on their event loop: a dump's file is set in the same loop
turn as its validation, so no purge slips between the two.

An HA follower's server purges its copy by the same rules (its own dumps and marks hold its
files): copies are byte-identical and a purge removes a prefix of the index, never the last
file, so whichever copy purged more, each one's index, `@@gtid_purged` (its first file's
PREVIOUS_GTIDS) and the copy's resume point stay right (docs/dumper.md, "Retention").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from binlog_writer import file_number, resume_file
from dumper.server.store.binlog_files import BinlogFiles

log = logging.getLogger(__name__)

CHECK_S = 1.0  # how often the retention task looks at the files
RETAIN_VAR = "cdc_retain_from"  # a session's user variable: keep this file and the later ones


@dataclass(slots=True, frozen=True)
class Holder:
    """Someone who still reads `file` (and so every later file)."""

    file: str
    who: str  # stays the same while the same reader holds it (logged once)
    where: str = ""  # how far it got (changes as it reads)

    def __str__(self) -> str:
        return f"{self.who} {self.where}".rstrip()


# Everyone who holds a file now (the server knows: its sessions and followers, holders.py).
Holders = Callable[[], list[Holder]]


def _number(name: str) -> int | None:
    try:
        return file_number(name)
    except ValueError:
        return None


def allowed(victims: list[str], held: list[Holder]) -> tuple[list[str], Holder | None]:
    """The victims before the first held one (files go in index order), and who holds it."""
    first: Holder | None = None
    for h in held:
        n = _number(h.file)
        if n is not None and (first is None or n < _number(first.file)):  # type: ignore[operator]
            first = h
    if first is None:
        return victims, None
    limit = _number(first.file)
    out = []
    for v in victims:
        n = _number(v)
        if n is None or limit is None or n >= limit:
            return out, first
        out.append(v)
    return out, None


@dataclass(slots=True)
class RetentionPolicy:
    expire_s: int = 0
    max_total: int = 0

    @property
    def enabled(self) -> bool:
        return self.expire_s > 0 or self.max_total > 0

    def due(self, files: BinlogFiles, now: float) -> list[str]:
        """Files the policy wants gone, oldest first (never the active, last one)."""
        victims = files.victims_before(now - self.expire_s) if self.expire_s > 0 else []
        if self.max_total > 0:
            sized = files.files()
            total = sum(f.size for f in sized)
            by_size = []
            for f in sized[:-1]:
                if total <= self.max_total:
                    break
                by_size.append(f.name)
                total -= f.size
            if len(by_size) > len(victims):
                victims = by_size
        return victims


def purgeable(
    files: BinlogFiles,
    held: list[Holder],
    victims: list[str],
    known: dict[tuple, bool] | None = None,
) -> tuple[list[str], Holder | None]:
    """`allowed` among the current holders, and never the newest file holding a whole
    transaction (nor any after it): a restart or a takeover of these files reads the key it
    resumes after there (`binlog_writer.resume_file`, `known` its memo). The files are read
    only when something would go: the active one (from its recovery point) and, right after a
    rotation, the files before it until one holds a transaction."""
    ok, holder = allowed(victims, held)
    if not ok:
        return ok, holder
    names = files.names()
    try:
        keep = resume_file(files.dir, files.base, names[names.index(ok[-1]) + 1 :], known)
        if keep is None:
            keep = resume_file(files.dir, files.base, ok, known)
    except (OSError, ValueError):  # a file gone underneath us: purge nothing this time
        return [], None
    if known is not None:
        for key in [k for k in known if k[0] not in names]:
            del known[key]
    if keep is not None and keep in ok:
        cut = ok.index(keep)
        return ok[:cut], Holder(
            keep, "the newest file with a whole transaction (a restart resumes from it)"
        )
    return ok, holder


def purge_held(files: BinlogFiles, held: list[Holder], victims: list[str], why: str) -> list[str]:
    """Purge `victims` up to the first file someone in `held` holds (logged); the purged names."""
    ok, holder = purgeable(files, held, victims)
    if holder is not None:
        log.info(
            "%s: %s not purged (nor anything after it) while %s",
            why,
            victims[len(ok)],
            holder,
        )
    return files.purge(ok)


class Retention:
    """The task that applies the policy every CHECK_S seconds, on a leader's files and on an HA
    follower's copy alike. A file held by a reader is logged once per file and holder, not
    every check."""

    def __init__(self, files: BinlogFiles, holders: Holders, policy: RetentionPolicy) -> None:
        self.files = files
        self.holders = holders
        self.policy = policy
        self.purged = 0
        self._logged: tuple[str, str] | None = None
        self._known: dict[tuple, bool] = {}  # which files hold a transaction (resume_file)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self.policy.enabled and self._task is None:
            self._task = asyncio.create_task(self._run(), name="retention")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def purge(self, victims: list[str], why: str) -> list[str]:
        """PURGE BINARY LOGS: `victims` up to the first held one, by the same rule."""
        return purge_held(self.files, self.holders(), victims, why)

    def check(self, now: float | None = None) -> list[str]:
        victims = self.policy.due(self.files, time.time() if now is None else now)
        if not victims:
            return []
        ok, holder = purgeable(self.files, self.holders(), victims, self._known)
        if holder is not None and self._logged != (victims[len(ok)], holder.who):
            self._logged = (victims[len(ok)], holder.who)
            log.info(
                "retention: %s is due but held (with the files after it) while %s",
                victims[len(ok)],
                holder,
            )
        gone = self.files.purge(ok)
        if gone:
            self.purged += len(gone)
            log.info("retention: purged %s", ", ".join(gone))
        return gone

    async def _run(self) -> None:
        while True:
            try:
                self.check()
            except OSError as exc:  # a file gone underneath us, a full disk: try again later
                log.warning("retention: %s", exc)
            await asyncio.sleep(CHECK_S)
