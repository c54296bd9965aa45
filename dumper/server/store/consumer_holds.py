"""Holds of named consumers (docs/retention.md): a consumer named in `[[dumper.consumers]]`, or
registered by its dump (`[dumper] register_consumers`), keeps the files it has not read from
purge even while it is disconnected, up to its caps in bytes and in time. Past a cap its hold
is dropped loudly (a warning, `report()` for `cdc status` and SHOW CONSUMERS, a counter for the
metrics), never silently; a dropped consumer that reads again within its caps holds again.

Where each consumer got to is kept in `consumer_holds.json` in the served directory, written
atomically when it changed (at most once per refresh): the server process owns the rule and
that directory and needs no GMS for it. With HA peers each copy also takes the consumers
connected to the other peers as its own running dumps (`remote`, polled by `peer_holds.py`), so
a takeover finds the holds where the consumers were on the old leader. The hold
is the file the consumer's dump was sending: a consumer resumes from what it got, in that file
or a later one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from binlog_writer import file_number
from cdc.config import DumperConfig
from cdc.files import write_atomically
from cdc.tasks import cancel_and_wait
from dumper.server.store.binlog_files import BinlogFile, BinlogFiles
from dumper.server.store.retention import Holder

log = logging.getLogger(__name__)

HOLDS_FILE = "consumer_holds.json"
UUID_VARS = ("replica_uuid", "slave_uuid")  # what MySQL replicas SET before their dump


@dataclass(slots=True, frozen=True)
class Seen:
    """A running dump as the holds see it."""

    server_id: int
    server_uuid: str
    file: str
    pos: int
    behind_since: float  # 0: it has everything it may be sent; else since when it has not


@dataclass(slots=True)
class ConsumerHold:
    """One consumer: who it is, its caps, where it got to and whether its hold was dropped."""

    name: str
    max_hold_bytes: int
    max_hold_s: int
    server_id: int = 0
    server_uuid: str = ""
    configured: bool = True  # named in the config (else registered by its dump)
    file: str = ""  # "" until it was seen reading
    pos: int = 0
    behind_since: float = 0.0
    seen_at: float = 0.0  # when a dump of it last ran
    dropped: str = ""  # why its hold was dropped; "" = it holds (once it has a position)
    dropped_at: float = 0.0

    def matches(self, seen: Seen) -> bool:
        if self.server_uuid and seen.server_uuid:
            return self.server_uuid.lower() == seen.server_uuid.lower()
        return bool(self.server_id) and self.server_id == seen.server_id

    def lag_s(self, lag_bytes: int, now: float) -> float:
        if lag_bytes <= 0:
            return 0.0
        return max(now - (self.behind_since or self.seen_at or now), 0.0)


def lag_bytes(files: list[BinlogFile], file: str, pos: int) -> int | None:
    """Bytes from `file`:`pos` to the end of `files` (archived and live); None: not there."""
    for i, f in enumerate(files):
        if f.name == file:
            return max(f.size - pos, 0) + sum(g.size for g in files[i + 1 :])
    return None


def over_cap(hold: ConsumerHold, behind: int, now: float) -> str:
    """Why `hold` may hold no longer ("" = it may): `behind` bytes past its byte cap, or
    behind for longer than its time cap."""
    if behind > hold.max_hold_bytes:
        return f"{behind} bytes behind > max_hold_bytes {hold.max_hold_bytes}"
    lag = hold.lag_s(behind, now)
    if lag > hold.max_hold_s:
        return f"behind for {lag:.0f}s > max_hold_s {hold.max_hold_s}"
    return ""


_SAVED = [f.name for f in fields(ConsumerHold)]


class ConsumerHolds:
    """The holds of the consumers of one served directory. `refresh()` takes the running
    dumps' positions (`seen`), drops the holds past their caps and saves; `holders()` are the
    holds for the retention rule (store/retention.py)."""

    def __init__(
        self,
        files: BinlogFiles,
        config: DumperConfig,
        seen: Callable[[], list[Seen]],
        clock: Callable[[], float] = time.time,
        remote: Callable[[], list[Seen]] = list,
    ) -> None:
        self.files = files
        self.seen = seen  # the dumps running on this server
        self.remote = remote  # those running on the other HA peers (peer_holds.py)
        self.clock = clock
        self.register = config.register_consumers
        self.default_caps = (config.consumer_max_hold_bytes, config.consumer_max_hold_s)
        self.path = files.dir / HOLDS_FILE
        self.dropped_total = 0
        self.holds: dict[str, ConsumerHold] = {
            c.name: ConsumerHold(
                c.name, c.max_hold_bytes, c.max_hold_s, c.server_id, c.server_uuid.lower()
            )
            for c in config.consumers
        }
        self._lag: dict[str, int] = {}
        self._connected: set[str] = set()
        self._saved = ""
        self._task: asyncio.Task | None = None
        self._load()

    def start(self, every_s: float = 1.0) -> None:
        """Refresh every `every_s` seconds (positions saved, caps applied) even when nothing
        is due for purge."""
        if self.enabled and self._task is None:
            self._task = asyncio.create_task(self._run(every_s), name="consumer-holds")

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        if self.enabled:
            with contextlib.suppress(OSError):
                self.refresh()  # the last positions

    async def _run(self, every_s: float) -> None:
        while True:
            try:
                self.refresh()
            except OSError as exc:  # a full disk, a file gone underneath us: again later
                log.warning("consumer holds: %s", exc)
            await asyncio.sleep(every_s)

    @property
    def enabled(self) -> bool:
        return bool(self.holds) or self.register

    # -- state ---------------------------------------------------------------------------------
    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning(
                "consumer holds: %s unreadable (%s): starting without positions", self.path, exc
            )
            return
        for rec in data.get("consumers", []):
            rec = {k: v for k, v in rec.items() if k in _SAVED}
            name = rec.get("name", "")
            hold = self.holds.get(name)
            if hold is not None:  # configured: its identity and caps come from the config
                for key in ("file", "pos", "behind_since", "seen_at", "dropped", "dropped_at"):
                    if key in rec:
                        setattr(hold, key, rec[key])
            elif not rec.get("configured", True) and self.register:
                rec["max_hold_bytes"], rec["max_hold_s"] = self.default_caps
                self.holds[name] = ConsumerHold(**rec)
            else:
                log.warning(
                    "consumer holds: %s is no longer named in the config (nor registered): "
                    "its hold at %s:%s is gone",
                    name,
                    rec.get("file", ""),
                    rec.get("pos", 0),
                )
        self._saved = self._text()

    def _text(self) -> str:
        recs = [asdict(h) for h in self.holds.values()]
        return json.dumps({"version": 1, "consumers": recs}, sort_keys=True)

    def _save(self) -> None:
        text = self._text()
        if text == self._saved:
            return
        write_atomically(self.path, text, fsync=True)
        self._saved = text

    # -- the rule ------------------------------------------------------------------------------
    def _match(self, seen: Seen) -> ConsumerHold | None:
        for hold in self.holds.values():
            if hold.matches(seen):
                return hold
        if not self.register or (not seen.server_uuid and seen.server_id <= 0):
            return None
        uuid = seen.server_uuid.lower()
        name = f"uuid:{uuid}" if uuid else f"server_id:{seen.server_id}"
        hold = ConsumerHold(name, *self.default_caps, seen.server_id, uuid, configured=False)
        self.holds[name] = hold
        log.info("consumer holds: %s registered (holds its unread files while away)", name)
        return hold

    def refresh(self) -> None:
        """Positions of the running dumps, then the caps, then save (if anything changed)."""
        if not self.enabled:
            return
        now = self.clock()
        connected: dict[str, Seen] = {}
        here: set[str] = set()
        local = self.seen()
        for i, seen in enumerate(local + self.remote()):
            hold = self._match(seen)
            if hold is None or not seen.file:
                continue
            if i < len(local):
                here.add(hold.name)
            was = connected.get(hold.name)
            if was is None or _key(seen.file, seen.pos) < _key(was.file, was.pos):
                connected[hold.name] = seen  # several dumps of one consumer: the one behind
        for name, seen in connected.items():
            hold = self.holds[name]
            hold.file, hold.pos = seen.file, seen.pos
            hold.behind_since, hold.seen_at = seen.behind_since, now
        self._connected = here  # SHOW CONSUMERS' Connected: here (peers learn only those)
        files = self.files.readable_files()
        for hold in self.holds.values():
            if not hold.file:
                continue
            behind = lag_bytes(files, hold.file, hold.pos)
            if behind is None and files and _key(hold.file, 0) > _key(files[-1].name, 0):
                behind = 0  # learned from a peer further on than this copy: not behind here
            self._lag[hold.name] = behind or 0
            if hold.name not in connected and hold.behind_since == 0 and behind:
                hold.behind_since = hold.seen_at  # written since it left: behind since then
            why = "its file was purged" if behind is None else over_cap(hold, behind, now)
            if why and not hold.dropped:
                self._drop(hold, why, now)
            elif not why and hold.dropped and hold.name in connected:
                hold.dropped, hold.dropped_at = "", 0.0
                log.warning(
                    "consumer holds: %s holds again from %s:%d (within its caps)",
                    hold.name,
                    hold.file,
                    hold.pos,
                )
        self._save()

    def _drop(self, hold: ConsumerHold, why: str, now: float) -> None:
        hold.dropped, hold.dropped_at = why, now
        self.dropped_total += 1
        log.warning(
            "consumer holds: the hold of %s at %s:%d is DROPPED (%s): retention may now purge "
            "the files it has not read; if they go, its next dump fails (error 1236)",
            hold.name,
            hold.file,
            hold.pos,
            why,
        )

    def holders(self) -> list[Holder]:
        """The holds in force now (refreshed first, so PURGE sees the newest positions)."""
        if not self.enabled:
            return []
        self.refresh()
        return [
            Holder(h.file, f"consumer {h.name}", f"at {h.file}:{h.pos}")
            for h in self.holds.values()
            if h.file and not h.dropped
        ]

    def report(self) -> list[dict]:
        """One JSON-able record per consumer (SHOW CONSUMERS, `cdc status`, the metrics)."""
        now = self.clock()
        out = []
        for h in self.holds.values():
            behind = self._lag.get(h.name, 0)
            out.append(
                {
                    "name": h.name,
                    "server_id": h.server_id,
                    "server_uuid": h.server_uuid,
                    "configured": h.configured,
                    "connected": h.name in self._connected,
                    "file": h.file,
                    "position": h.pos,
                    "lag_bytes": behind,
                    "lag_s": round(h.lag_s(behind, now), 3) if h.file else 0.0,
                    "holds": h.file if h.file and not h.dropped else "",
                    "dropped": h.dropped,
                    "dropped_at": h.dropped_at,
                    "max_hold_bytes": h.max_hold_bytes,
                    "max_hold_s": h.max_hold_s,
                }
            )
        return out


def _key(file: str, pos: int) -> tuple[int, int]:
    try:
        return file_number(file), pos
    except ValueError:
        return 0, pos
