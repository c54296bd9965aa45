"""A new multi-stream leader brings each stream's copy up to the furthest live follower's before
its term begins there (docs/streams.md, "Who takes over").

Why: the old leader served stream i's consumers up to the furthest end any follower
acknowledged in stream i (its ack gate, rule 9 per stream). With several followers the election
cannot always pick one that is furthest in every stream; in a stream where the winner is behind
another follower, its consumers may have read past the winner's end, and a term that began
there would write other bytes (other GTIDs) at positions they already read. So before the
stream processes recover the copies and record where the term begins, the winner fetches, per
stream, the tail it lacks from the follower that holds it: a non-blocking dump of that
follower's copy, served read-only on its stream port (`StreamCopyServers`), into this copy
through the follower's own copy path (`BinlogCopier`: the same bytes, whole transactions only).

Why those bytes are the old term's: a follower copies only once its copy is aligned with the
term it follows (cut back to that term's start, `ha-state.json`), and both copies then hold
prefixes of that one term's stream. It is also checked: the dump starts at this copy's last
event, which the other copy must hold byte for byte (the same header, log_pos and CRC: for a
transaction end, its `CTS::` mark) before anything is taken. A follower that does not answer,
or whose copy differs there, is passed over with a warning; the stream then begins where the
copies this process could reach end, as before.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
from collections.abc import Callable, Sequence

from binlog_writer import BinlogCopier, CopyError, mark_event_ending_at
from cdc.binlog.constants import HEADER_LEN, EventType
from cdc.binlog.header import event_size, log_pos
from cdc.config import DumperConfig
from cdc.protocol import BinlogPosition, DumpClient, DumpError, DumpSettings
from dumper.ha.election import order
from topology import Member

log = logging.getLogger(__name__)


class TailError(RuntimeError):
    """The other copy does not continue this one (it differs at this copy's last event)."""


def sources(
    members: Sequence[Member], me: int, stream: int, end: tuple[str, int], lease_s: float
) -> list[Member]:
    """The live followers whose copy of `stream` reached at least `end` when they last
    reported, furthest first (one level with it may have copied more since its report)."""
    found = [
        m
        for m in members
        if m.dumper_id != me
        and m.role == "follower"
        and m.age_s <= lease_s
        and len(m.streams) > stream
        and order(*m.streams[stream]) >= order(*end)
    ]
    return sorted(found, key=lambda m: (order(*m.streams[stream]), -m.dumper_id), reverse=True)


def stream_port_address(address: str, stream: int) -> str:
    """A dumper's stream port from its main address (port + 1 + stream: `[dumper]
    stream_port` is 0 with peers, cdc/config.py)."""
    host, _, port = address.rpartition(":")
    return f"{host}:{int(port) + 1 + stream}"


def last_event(copier: BinlogCopier) -> tuple[str, int, bytes] | None:
    """The last event of the copy (file, start, bytes): a transaction's `CTS::` mark, or the
    ROTATE/STOP or header event it ends with. None: no file, or only the file's FDE."""
    if not copier.file:
        return None
    end = copier.pos
    with (
        open(copier.dir / copier.file, "rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m,
    ):
        found = mark_event_ending_at(m, end, 4)
        start = found[0] if found is not None else _walk_to(m, end)
        if start is None or start == 4:  # (the FDE: the dump re-sends it with other flags)
            return None
        return copier.file, start, m[start:end]


def _walk_to(buf, end: int) -> int | None:
    """The start of the event ending at `end`, walking the headers from the file's first event
    (a copy that does not end at a mark: a file's header events, or its ROTATE)."""
    pos, last = 4, None
    while pos < end:
        size = event_size(buf, pos)
        if size < HEADER_LEN:
            return None  # (not an event: a copy holds only checked ones, but never loop)
        last, pos = pos, pos + size
    return last if pos == end else None


# A dump of another member's copy (non-blocking: it ends at that copy's end), by address and
# a description for messages: `peers.peer_dump_settings`, with this follower's server_id.
Settings = Callable[[str, str], DumpSettings]


async def fetch_tail(copier: BinlogCopier, settings: DumpSettings) -> tuple[str, int]:
    """Append to `copier`'s copy what the copy served by `settings` holds after it; returns
    the copy's end. Raises `TailError` if that copy does not continue this one."""
    overlap = last_event(copier)
    if overlap is None:
        start = BinlogPosition(*copier.resume_point())
    else:
        start = BinlogPosition(overlap[0], overlap[1])
    what = settings.name
    client = DumpClient(settings, start)
    try:
        async for batch in client.batches():
            for ev in batch:
                if overlap is not None:
                    if ev.type_code == EventType.FORMAT_DESCRIPTION and log_pos(ev.data) == 0:
                        continue  # re-sent at a mid-file start
                    if (ev.file, ev.pos, bytes(ev.data)) != overlap:
                        raise TailError(
                            f"{what} differs from this copy at {overlap[0]}:{overlap[1]}"
                        )
                    overlap = None
                    continue
                copier.add(ev.file, ev.pos, ev.data)
            copier.sync()
    finally:
        copier.close()  # (a transaction not received whole stays out)
        await client.close()
    if overlap is not None:
        raise TailError(f"{what} does not hold {overlap[0]}:{overlap[1]}")
    return copier.file, copier.pos


async def catch_up(
    d: DumperConfig,
    copies,
    members: Sequence[Member],
    end_of: Callable,
    settings: Settings,
    timeout_s: float,
) -> None:
    """Bring each stream copy of `copies` (`CopyTarget`s) up to the furthest live follower's
    among `members`; `end_of(copy)` is a copy's end. Each follower that may hold more is asked
    in turn (a no-op for one that does not); one that fails is passed over."""
    lease_s = d.lease_ms / 1000
    for copy in copies:
        before = end_of(copy)
        for m in sources(members, d.id, copy.stream, before, lease_s):
            address = stream_port_address(m.address, copy.stream)
            what = f"dumper {m.dumper_id}'s copy of stream {copy.stream} at {address}"
            had = end_of(copy)
            try:
                async with asyncio.timeout(timeout_s):
                    now = await fetch_tail(
                        BinlogCopier(copy.dir, base=d.binlog_base), settings(address, what)
                    )
            except (TailError, DumpError, CopyError, ConnectionError, OSError, TimeoutError) as exc:
                log.warning(
                    "dumper %d: stream %d's tail not taken from dumper %d: %s",
                    d.id,
                    copy.stream,
                    m.dumper_id,
                    exc,
                )
                continue
            if order(*now) > order(*had):
                log.info(
                    "dumper %d: stream %d's copy brought up from %s:%d to %s:%d from %s "
                    "(its consumers may have read that far)",
                    d.id,
                    copy.stream,
                    *had,
                    *now,
                    what,
                )
