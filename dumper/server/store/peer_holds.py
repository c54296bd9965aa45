"""Consumer holds that survive an HA takeover (docs/retention.md, "Holds and HA"): each dumper's
server asks every other peer (`[[dumper.peers]]`) for its `SHOW CONSUMERS` once a second (on
a kept connection), as `[dumper] peer_user`, and takes the consumers connected *there* as running dumps of its own
(`ConsumerHolds`'s `remote`): a peer's hold state follows where a consumer reads on any peer,
and is saved in its own `consumer_holds.json` as if it had served the dump. So the node that
takes over holds from where each consumer was on the old leader, at most a poll before that
leader went away (positions only move forward: an older one holds more, never less).

Only connected consumers are learned: a peer's position of a consumer that left it is what
this node learned while it was connected, so nothing echoes back and forth. The copies are
byte-identical, so a peer's file:pos is the same place here. A peer that does not answer
teaches nothing until it answers again (what was learned is kept)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from cdc.config import DumperConfig, DumperPeer
from cdc.protocol.client import MysqlClient
from cdc.tasks import cancel_and_wait
from dumper.server.store.consumer_holds import Seen

log = logging.getLogger(__name__)

POLL_S = 1.0
TIMEOUT_S = 3.0


def connected_rows(rows: list[tuple], now: float) -> list[Seen]:
    """The consumers a peer's SHOW CONSUMERS says are connected there, as running dumps
    (behind since `now - Lag_seconds` when it is behind)."""
    out = []
    for row in rows:
        _, server_id, uuid, _, connected, file, pos, lag_bytes, lag_s = row[:9]
        if connected != "Yes" or not file:
            continue
        behind = now - float(lag_s or 0) if int(lag_bytes or 0) > 0 else 0.0
        out.append(Seen(int(server_id or 0), uuid or "", file, int(pos or 0), behind))
    return out


class PeerHolds:
    """The consumers connected to the other peers, polled (one task per server)."""

    def __init__(self, config: DumperConfig, clock: Callable[[], float] = time.time) -> None:
        self.peers: list[DumperPeer] = [
            p for p in config.peers if p.id != config.id and p.port and config.streams == 1
        ]
        self.user, self.password = config.peer_user, config.peer_password
        self.clock = clock
        self._seen: dict[int, list[Seen]] = {}
        self._failing: set[int] = set()
        self._task: asyncio.Task | None = None
        self._clients: dict[int, MysqlClient] = {}  # peer id -> its kept connection

    def seen(self) -> list[Seen]:
        return [s for seen in self._seen.values() for s in seen]

    def start(self, every_s: float = POLL_S) -> None:
        if self.peers and self._task is None:
            self._task = asyncio.create_task(self._run(every_s), name="peer-holds")

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()

    async def _run(self, every_s: float) -> None:
        while True:
            await asyncio.gather(*(self.poll(p) for p in self.peers))
            await asyncio.sleep(every_s)

    async def poll(self, peer: DumperPeer) -> None:
        try:
            rows = await asyncio.wait_for(self._show_consumers(peer), TIMEOUT_S)
        except (OSError, TimeoutError, ConnectionError, ValueError, RuntimeError) as exc:
            self._seen.pop(peer.id, None)
            if peer.id not in self._failing:
                self._failing.add(peer.id)
                log.info(
                    "consumer holds: peer %d (%s:%d) does not answer SHOW CONSUMERS (%s): its "
                    "consumers' positions are not learned until it does",
                    peer.id,
                    peer.host,
                    peer.port,
                    exc,
                )
            return
        if peer.id in self._failing:
            self._failing.discard(peer.id)
            log.info("consumer holds: peer %d answers SHOW CONSUMERS again", peer.id)
        self._seen[peer.id] = connected_rows(rows, self.clock())

    async def _show_consumers(self, peer: DumperPeer) -> list[tuple]:
        """One query on the peer's kept connection (a login a second per peer is a log line and
        a handshake each on the peer); a failed or timed-out one is dropped, the next poll
        connects again."""
        client = self._clients.pop(peer.id, None)
        if client is None or client.closed:
            client = await MysqlClient.connect(
                peer.host, peer.port, self.user, self.password, timeout=TIMEOUT_S
            )
        try:
            rows = (await client.query("SHOW CONSUMERS")).rows
        except BaseException:
            with contextlib.suppress(Exception):
                client.close()
            raise
        self._clients[peer.id] = client
        return rows
