"""Re-seed an HA follower's copy from the leader (`cdc ha reseed`, docs/dumper.md "Re-seeding
a follower").

A follower away longer than `lease_ms` no longer holds files on the leader; once the leader
purged the file its copy continues in, its dump gets 1236 for good. The re-seed copies the
leader's files as they are now, byte for byte, through the follower's own copy path (a dump
with the follower's server_id into a `BinlogCopier`), non-blocking: it ends at the leader's end
when it started. The copy is made beside the old one (`<binlog_dir>/.reseed/`) and replaces it
only when whole, so an interrupted re-seed leaves the old copy as it was. A multi-stream
follower (`[dumper] streams` > 1) keeps a copy per stream (`<binlog_dir>/stream<i>`): each is
re-seeded the same way from the leader's stream port, all copied before any is replaced.

The follower must not run meanwhile (its dump has the same server_id, and its copy is being
replaced): the GMS's member reports say whether it does (right after `cdc stop`, it waits for
a lease without reports).

While it copies, the dump holds the leader's files as any connected dump does (retention
never purges a file a dump reads or an earlier one), so it is safe while the leader serves.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from binlog_writer import BinlogCopier, CopyError, RecoveryPoint, copy_dump, layout
from cdc.config import Config, DumperConfig
from cdc.protocol import BinlogPosition, DumpClient, DumpError
from cdc.streams import STREAM_PROGRESS_FILE
from dumper.ha.copies import STATE_FILE, CopyTarget, copy_targets, save_state_term
from dumper.ha.deps import LeaseStore
from dumper.ha.peers import leader_dump_settings
from topology import Lease

log = logging.getLogger(__name__)

STAGING = ".reseed"  # the new copy is made here, inside the binlog directory (same filesystem)


class ReseedError(RuntimeError):
    """The re-seed could not run or failed; the old copy is unchanged. Says what to do."""


@dataclass(slots=True)
class CopyReseeded:
    """One copy replaced: the global binlog (`stream` None) or one stream's."""

    stream: int | None
    files: list[str] = field(default_factory=list)  # the new copy's files
    size: int = 0
    removed: list[str] = field(default_factory=list)  # the old copy's files

    def __str__(self) -> str:
        first, last = (self.files[0], self.files[-1]) if self.files else ("-", "-")
        old = f"{self.removed[0]}..{self.removed[-1]}" if self.removed else "nothing"
        where = "" if self.stream is None else f"stream {self.stream}: "
        return (
            f"{where}{len(self.files)} file(s) {first}..{last}, {self.size} bytes; "
            f"old copy ({old}) removed"
        )


@dataclass(slots=True)
class Reseeded:
    dumper_id: int
    leader: int
    address: str
    term: int
    copies: list[CopyReseeded] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"dumper {self.dumper_id}: re-seeded from dumper {self.leader} at {self.address} "
            f"(term {self.term}): " + "; ".join(str(c) for c in self.copies)
        )


async def reseed(config: Config, store: LeaseStore) -> Reseeded:
    """Replace follower `config.dumper.id`'s copy (`config` as that peer runs it:
    `Config.for_dumper`) with the leader's current files. With several streams, every stream's
    copy, each from the leader's stream port: all are staged before any is replaced, so a
    failed copy leaves every old copy as it was."""
    d = config.dumper
    await _leader(store, d.id)
    await _stopped(store, d.id, d.lease_ms / 1000)
    lease = await _leader(store, d.id)  # again: a takeover may have happened meanwhile
    targets = copy_targets(d)
    done = Reseeded(d.id, lease.holder, lease.address, lease.term)
    log.info("dumper %d: re-seeding from dumper %d at %s", d.id, lease.holder, lease.address)
    try:
        for target in targets:
            done.copies.append(await _stage(d, lease, target))
    except ReseedError:
        for target in targets:
            shutil.rmtree(target.dir / STAGING, ignore_errors=True)
        raise
    for target, copy in zip(targets, done.copies, strict=True):
        staging = target.dir / STAGING
        # The copy is a prefix of this term's stream (or of a later one's, if the leader
        # changed meanwhile: the follower's term alignment then cuts it back, as for any copy).
        save_state_term(staging, lease.term)
        copy.removed = _replace_copy(target.dir, staging, d.binlog_base)
        if target.stream is not None:
            # What this dumper saved when it last led the stream says nothing of the new copy.
            (target.dir / STREAM_PROGRESS_FILE).unlink(missing_ok=True)
    return done


async def _stage(d: DumperConfig, lease: Lease, target: CopyTarget) -> CopyReseeded:
    """Copy the leader's files of `target` into `<its dir>/.reseed/`."""
    staging = target.dir / STAGING
    shutil.rmtree(staging, ignore_errors=True)  # what an interrupted re-seed left
    address = target.leader_address(lease)
    what = "" if target.stream is None else f" stream {target.stream}"
    copier = BinlogCopier(staging, base=d.binlog_base)
    settings = leader_dump_settings(d, lease, non_blocking=True, address=address)
    client = DumpClient(settings, BinlogPosition("", 4))
    try:
        await copy_dump(client, copier)
    except (DumpError, CopyError, ConnectionError, OSError) as exc:
        raise ReseedError(
            f"dumper {d.id}: copying{what} from dumper {lease.holder} at {address} failed: "
            f"{exc}; the old copy is unchanged, run the re-seed again"
        ) from None
    done = CopyReseeded(target.stream, layout.read_index(staging, d.binlog_base))
    if not done.files:
        raise ReseedError(
            f"dumper {lease.holder} at {address} served no file{what and ' of' + what}: "
            "nothing to re-seed from"
        )
    done.size = sum((staging / n).stat().st_size for n in done.files)
    return done


async def _leader(store: LeaseStore, dumper_id: int) -> Lease:
    lease = await store.current()
    if lease is None or not lease.live:
        raise ReseedError(
            "no dumper leads now (no live lease in the GMS): start one, then re-seed "
            f"dumper {dumper_id} from it"
        )
    if lease.holder == dumper_id:
        raise ReseedError(
            f"dumper {dumper_id} leads (term {lease.term}): its files are the global binlog, "
            "there is nothing to re-seed it from"
        )
    return lease


async def _stopped(store: LeaseStore, dumper_id: int, lease_s: float) -> None:
    """Returns once `dumper_id` has not reported to the GMS for a lease (it reports every
    renew interval while it runs): right after `cdc stop` that is a short wait; a report
    meanwhile means it runs."""
    waited = False
    while True:
        me = next((m for m in await store.members() if m.dumper_id == dumper_id), None)
        if me is None or me.age_s > lease_s:
            return
        if waited:
            raise ReseedError(
                f"dumper {dumper_id} is running (it reported {me.age_s:.1f}s ago as {me.role} "
                f"at {me.address}): stop it first (cdc stop --dumper-id {dumper_id})"
            )
        log.info(
            "dumper %d reported %.1fs ago: waiting for a lease without reports", dumper_id, me.age_s
        )
        await asyncio.sleep(lease_s - me.age_s + 0.2)
        waited = True


def _replace_copy(target: Path, staging: Path, base: str) -> list[str]:
    """The old copy's files out, the staged ones in; the index last (until it is in place the
    directory holds no copy, which a follower would fetch again from scratch). Returns the old
    copy's file names."""
    old = layout.read_index(target, base)
    stray = sorted(p.name for p in target.glob(f"{base}.[0-9]*") if p.name not in old)
    layout.index_path(target, base).unlink(missing_ok=True)
    for name in [*old, *stray, STATE_FILE, RecoveryPoint(target, base).path.name]:
        (target / name).unlink(missing_ok=True)
    for path in sorted(staging.iterdir()):
        if path.name != layout.index_path(staging, base).name:
            os.replace(path, target / path.name)
    os.replace(layout.index_path(staging, base), layout.index_path(target, base))
    layout.fsync_dir(target)
    staging.rmdir()
    return old
