"""Serving acknowledged data only (HA, docs/dumper.md "The leader-consumer gap"): followers
acknowledge what their copy holds durably (a semi-sync style reply on their dump connection),
and the leader serves its ordinary consumers only up to the furthest acknowledged file:pos.

Like MySQL's semi-sync master: a consumer that would have to wait for an acknowledgement longer
than `ack_wait_ms` gets the data anyway and the gate turns *degraded* (one warning): nobody
waits any more until a live follower acknowledged everything served meanwhile. So a leader
without followers still serves, at most `ack_wait_ms` late once.

Unlike semi-sync, only while the leader is *sure* of its lease (`sure()`: a renewal confirmed
lately: `HaState.sure_until`, dumper/ha/state.py). A leader cut off from the GMS may already have a
successor, and what no follower holds would then be a fork: in doubt, the gate never gives up,
serves no further than the furthest acknowledgement of its term (however old: a fenced leader's
followers have moved on), and a degraded gate stops serving past it too.

Unlike semi-sync too, a degraded HA leader serves no further than its *served bound* (`bound()`,
docs/dumper.md "A degraded gate's bound"): a position it recorded in the GMS before serving past
the acknowledgements, so that no candidate whose copy ends before it takes the next term (a fork
for the consumers who read that far). A dump held there asks for more (`wants`, `asked`); the
HA node records the writer's end further on, in steps (dumper/ha/served_bound.py). No bound
(None: a gate outside HA) serves as far as written, as before.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from binlog_writer import file_number
from cdc.tasks import wait_event

log = logging.getLogger(__name__)

REPLY_MAGIC = 0xEF  # MySQL/MariaDB semi-sync ACK: 0xEF, u64 position, file name (to the end)
_POS = struct.Struct("<Q")


def ack_packet(file: str, pos: int) -> bytes:
    return bytes((REPLY_MAGIC,)) + _POS.pack(pos) + file.encode()


def parse_ack(payload: bytes) -> tuple[str, int] | None:
    """(file, pos) of a semi-sync reply, or None for anything else (COM_PING, garbage)."""
    if len(payload) < 10 or payload[0] != REPLY_MAGIC:
        return None
    name = payload[9:].split(b"\0", 1)[0].decode("utf-8", "replace")
    try:
        file_number(name)
    except ValueError:
        return None
    return name, _POS.unpack_from(payload, 1)[0]


def _order(file: str, pos: int) -> tuple[int, int]:
    """Binlog coordinates in stream order (`binlog.000012` → 12)."""
    return (file_number(file), pos)


@dataclass(slots=True)
class _Ack:
    file: str
    pos: int
    at: float  # monotonic


class AckGate:
    """Acknowledgements of the followers (by dump server_id) and the limit they put on ordinary
    dumps. `active()` says whether the gate applies now (this process leads)."""

    def __init__(
        self,
        follower_server_ids: Iterable[int],
        *,
        live_ms: int,
        wait_ms: int,
        active: Callable[[], bool] = lambda: True,
        sure: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        bound: Callable[[], tuple[int, int] | None] | None = None,
    ) -> None:
        """`bound`: the served bound (file number, position) a degraded gate stops at, as
        recorded in the GMS for this term ((0, 0): none yet); None: no bound."""
        self.follower_ids = frozenset(follower_server_ids)
        self.live_s = live_ms / 1000
        self.wait_s = wait_ms / 1000
        self.active = active
        self.sure = sure
        self._clock = clock
        self._acks: dict[int, _Ack] = {}
        self._changed = asyncio.Event()
        self.degraded = False
        self.degraded_count = 0  # how often the gate gave up waiting (status, tests)
        self._served = (0, 0)  # furthest position served while degraded
        self.bound = bound
        self.wants = (0, 0)  # furthest position a degraded dump waits at for a higher bound
        self.asked = asyncio.Event()  # set when `wants` grew (the HA node records a bound)
        self._bound_seen: tuple[int, int] | None = None

    def is_follower(self, server_id: int) -> bool:
        return server_id in self.follower_ids

    def reset(self) -> None:
        """A new term: acknowledgements of an earlier one say nothing about this stream."""
        self._acks.clear()
        self.degraded, self._served, self.wants = False, (0, 0), (0, 0)

    # -- followers ----------------------------------------------------------------------------
    def record(self, server_id: int, file: str, pos: int) -> None:
        self._acks[server_id] = _Ack(file, pos, self._clock())
        if self.degraded:
            best = self.acknowledged()
            # Re-armed once a follower holds all served, and all a candidate must reach to
            # take over (the served bound): a takeover then needs no wait.
            bound = self.bound() if self.bound is not None else None
            if best is not None and _order(*best) >= max(self._served, bound or (0, 0)):
                self.degraded = False
                log.info(
                    "followers acknowledged %s:%d: serving acknowledged data only again", *best
                )
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()  # waiters hold the old (set) event

    def acknowledged(self, *, live_only: bool = True) -> tuple[str, int] | None:
        """The furthest file:pos acknowledged by a follower heard from within `live_ms` (or
        at any time of this term: `live_only` False)."""
        oldest = self._clock() - self.live_s if live_only else float("-inf")
        live = [a for a in self._acks.values() if a.at >= oldest]
        if not live:
            return None
        best = max(live, key=lambda a: _order(a.file, a.pos))
        return best.file, best.pos

    def followers(self) -> dict[int, tuple[str, int, float]]:
        """server_id → (file, pos, seconds since its last acknowledgement)."""
        now = self._clock()
        return {sid: (a.file, a.pos, now - a.at) for sid, a in self._acks.items()}

    # -- the server process (dumper/server/serve_process.py) -----------------------------------------
    def report(self) -> dict:
        """What `cdc status` shows, as JSON for the leader's copy of the gate."""
        return {
            "followers": {str(k): list(v) for k, v in self.followers().items()},
            "degraded": self.degraded,
            "degraded_count": self.degraded_count,
            "wants": list(self.wants),
        }

    def load_report(self, report: dict) -> None:
        """Mirror the server process's gate (the leader's copy only answers `cdc status`)."""
        now = self._clock()
        self._acks = {
            int(sid): _Ack(f, int(p), now - float(age))
            for sid, (f, p, age) in report["followers"].items()
        }
        self.degraded = bool(report["degraded"])
        self.degraded_count = int(report["degraded_count"])
        wants = tuple(report.get("wants", (0, 0)))
        if wants != self.wants:
            self.wants = (int(wants[0]), int(wants[1]))
            self.asked.set()

    def bound_changed(self) -> None:
        """The served bound may have grown (a new publication): wake the dumps held at it."""
        now = self.bound() if self.bound is not None else None
        if now != self._bound_seen:
            self._bound_seen = now
            self._wake()

    # -- ordinary dumps -----------------------------------------------------------------------
    def limit(self, name: str) -> int | None:
        """Where a dump of file `name` must stop for now: 0 (nothing of it is acknowledged),
        a position, or None (no limit: the gate is off or degraded without a served bound, or
        the file is acknowledged whole, or within the bound)."""
        if not self.active():
            return None
        sure = self.sure()
        bound = None
        if self.degraded and sure:
            bound = self.bound() if self.bound is not None else None
            if bound is None:
                return None  # (no served bound: as far as written)
        ack = self.acknowledged(live_only=sure)
        reach = _order(*ack) if ack is not None else None
        if bound is not None:
            reach = bound if reach is None else max(reach, bound)
        if reach is None:
            return 0
        mine, (theirs, pos) = _order(name, 0)[0], reach
        if theirs > mine:
            return None
        return pos if theirs == mine else 0

    def served(self, name: str, pos: int) -> None:
        """A dump sent up to `name:pos` while degraded (what followers must reach again)."""
        at = _order(name, pos)
        if at > self._served:
            self._served = at

    def give_up(self, name: str, pos: int, waited_s: float) -> bool:
        """Serve past the acknowledgements after a dump waited `waited_s` at `name:pos`;
        refused (False) while the lease is in doubt, and at the served bound (the dump asks
        for a further one: `wants`)."""
        if not self.sure():
            return False
        if not self.degraded:
            self._degrade(name, pos, waited_s)
        bound = self.bound() if self.bound is not None else None
        if bound is not None and _order(name, pos) >= bound:
            # Held by the served bound: ask the HA node to record a further one (it wakes us).
            if _order(name, pos) > self.wants:
                self.wants = _order(name, pos)
                self.asked.set()
            return False
        return True

    def _degrade(self, name: str, pos: int, waited_s: float) -> None:
        self.degraded = True
        self.degraded_count += 1
        ack = self.acknowledged()
        log.warning(
            "no follower acknowledged %s:%d within %.1f s (furthest live acknowledgement: %s): "
            "serving consumers data no follower holds yet until followers catch up",
            name,
            pos,
            waited_s,
            f"{ack[0]}:{ack[1]}" if ack else "none",
        )
        self._wake()  # every dump waiting for an acknowledgement goes on now (to the bound)

    async def wait(self, timeout: float) -> None:
        """Until the next acknowledgement, at most `timeout` seconds."""
        await wait_event(self._changed, timeout)
