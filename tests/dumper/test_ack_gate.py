"""Serving acknowledged data only (HA leader): an ordinary consumer gets no byte past what a
follower acknowledged, until the acknowledgement arrives or the wait bound passes; then the
gate serves anyway (degraded) until the follower acknowledged all that was served."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from cdc.protocol import BinlogPosition, DumpClient, DumpSettings
from dumper.server import EventNotifier, serve
from dumper.server.dump.ack_gate import AckGate, ack_packet, parse_ack
from tests.dumper.binlog_gen import T1
from tests.dumper.helpers import PASSWORD, USER, make_config, schema

pytestmark = pytest.mark.asyncio(loop_scope="function")

FOLLOWER_ID = 9902
WAIT_MS = 1500


class Reader:
    """A dump client in a task; `ends` is the furthest (file number, end) received."""

    def __init__(self, port: int, server_id: int) -> None:
        settings = DumpSettings(
            "127.0.0.1", port, USER, PASSWORD, server_id, name="test", reconnect=False
        )
        settings.keep_rotate = True
        self.client = DumpClient(settings, BinlogPosition("", 4))
        self.events: list[tuple[str, int]] = []  # (file, end) of each event received
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for batch in self.client.batches():
            self.events += [(e.file, e.end) for e in batch if e.pos >= 4 and e.end > e.pos]

    @property
    def last(self) -> tuple[str, int]:
        return self.events[-1] if self.events else ("", 0)

    async def until(self, what, timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            while not what():
                await asyncio.sleep(0.02)

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
        await self.client.close()


async def test_ack_packet_round_trip():
    assert parse_ack(ack_packet("binlog.000007", 123456789012)) == ("binlog.000007", 123456789012)
    assert parse_ack(b"\x0e") is None  # COM_PING
    assert parse_ack(b"\xef" + bytes(8)) is None  # no file name
    assert parse_ack(ack_packet("../etc", 4)) is None  # not a binlog file name


async def test_consumer_waits_for_follower_acknowledgement(binlogs):
    gate = AckGate([FOLLOWER_ID], live_ms=10_000, wait_ms=WAIT_MS)
    server = await serve(
        make_config(binlogs.dir), notifier=EventNotifier(), schema=schema(), acks=gate
    )
    follower = consumer = None
    try:
        # The follower's own dump is never held back.
        follower = Reader(server.port, FOLLOWER_ID)
        f2_end = (binlogs.dir / "binlog.000002").stat().st_size
        await follower.until(lambda: follower.last == ("binlog.000002", f2_end))
        ends = follower.events
        f1 = [end for f, end in ends if f == "binlog.000001"]
        f2 = [end for f, end in ends if f == "binlog.000002"]
        ack1 = ("binlog.000001", f1[len(f1) // 2])  # half-way through the first file

        # No acknowledgement yet: an ordinary consumer gets nothing but the preamble.
        consumer = Reader(server.port, 7000)
        follower.client.reply(ack_packet(*ack1))
        await consumer.until(lambda: consumer.last == ack1)
        await asyncio.sleep(0.3)
        assert consumer.last == ack1, "a consumer got data no follower acknowledged"

        # The next acknowledgement (in the next file) lets it through to there, not further.
        ack2 = ("binlog.000002", f2[1])
        follower.client.reply(ack_packet(*ack2))
        await consumer.until(lambda: consumer.last == ack2)
        assert ("binlog.000001", f1[-1]) in consumer.events  # the ROTATE, the whole file
        await asyncio.sleep(0.3)
        assert consumer.last == ack2 and not gate.degraded

        # No more acknowledgements: after the bound the consumer gets the rest anyway, once.
        t0 = asyncio.get_running_loop().time()
        await consumer.until(lambda: consumer.last == ("binlog.000002", f2_end))
        waited = asyncio.get_running_loop().time() - t0
        assert waited >= WAIT_MS / 1000 - 0.5
        assert gate.degraded and gate.degraded_count == 1

        # Degraded: new data flows at once, until the follower acknowledged all that was served.
        binlogs.active.txn(T1, 6, insert=[(5, "e")])
        binlogs.active.flush(binlogs.dir / "binlog.000002")
        grown = (binlogs.dir / "binlog.000002").stat().st_size
        await consumer.until(lambda: consumer.last == ("binlog.000002", grown), timeout=3)
        follower.client.reply(ack_packet("binlog.000002", grown))
        await follower.until(lambda: not gate.degraded, timeout=3)

        # Re-armed: the next transaction waits for its acknowledgement again.
        binlogs.active.txn(T1, 7, insert=[(6, "f")])
        binlogs.active.flush(binlogs.dir / "binlog.000002")
        grown2 = (binlogs.dir / "binlog.000002").stat().st_size
        await asyncio.sleep(0.5)
        assert consumer.last == ("binlog.000002", grown)
        follower.client.reply(ack_packet("binlog.000002", grown2))
        await consumer.until(lambda: consumer.last == ("binlog.000002", grown2), timeout=3)
        assert gate.degraded_count == 1
    finally:
        for r in (consumer, follower):
            if r is not None:
                await r.close()
        await server.close()


async def test_stale_acknowledgement_does_not_count(binlogs):
    """A follower not heard from within `live_ms` holds nobody back for long: the dump waits
    the bound once, then serves."""
    gate = AckGate([FOLLOWER_ID], live_ms=200, wait_ms=300)
    gate.record(FOLLOWER_ID, "binlog.000001", 4)
    await asyncio.sleep(0.25)
    assert gate.acknowledged() is None
    assert gate.limit("binlog.000001") == 0
    gate.active = lambda: False  # not the leader (a follower serving its copy): no limit
    assert gate.limit("binlog.000001") is None


async def test_status_line_shows_acknowledgements():
    from cdc_cli.commands.pipeline import _ha_line

    ha = {"dumper_id": 1, "address": "h:1", "role": "leader", "term": 3}
    ha |= {
        "acknowledged": {"9902": {"file": "binlog.000002", "position": 791, "age_s": 0.4}},
        "ack_gate_degraded": False,
    }
    line = _ha_line(ha)
    assert "acknowledged data only: on" in line and "binlog.000002:791 (0.4s ago)" in line
    assert "DEGRADED" in _ha_line(ha | {"ack_gate_degraded": True})
    bound = {"served_bound": {"file": "binlog.000002", "position": 900}}
    assert "up to binlog.000002:900 (recorded" in _ha_line(ha | bound)
    waits = {"term": 4, "holder": 1, "served_file": "binlog.000002", "served_position": 900}
    waits |= {"copy_file": "binlog.000002", "copy_position": 400, "since_s": 3.0}
    line = _ha_line(ha | {"role": "candidate", "takeover_waits_for": waits})
    assert "NOT TAKING OVER" in line and "binlog.000002:900" in line and "dumper 1" in line


async def test_status_of_a_leader_still_starting_its_pipeline():
    """HA: between winning the lease and building the pipeline the status file holds only the HA
    part; `cdc status` said KeyError: 'last_tso' there (seen in CI)."""
    from cdc_cli.commands.pipeline import status_lines

    ha = {"dumper_id": 2, "address": "h:2", "role": "leader", "term": 2}
    lines = status_lines({"written_at": 100.0, "ha": ha}, now=100.5)
    assert lines == ["dumper 2 (h:2): leader, term 2", "pipeline starting  (status 0.5s old)"]


async def test_a_gate_in_doubt_of_its_lease_never_serves_past_acknowledgements():
    """Issue 39: a leader cut off from the GMS served what no follower held, 1 s after its
    follower fell silent, although a successor may already have led. While the lease is in
    doubt (`sure` False) the gate does not give up, serves no further than the furthest
    acknowledgement of its term however old, and a gate degraded before stops serving past
    it too. Back in touch with the GMS it may give up again."""
    now = [0.0]
    sure = [True]
    gate = AckGate(
        [FOLLOWER_ID], live_ms=200, wait_ms=300, sure=lambda: sure[0], clock=lambda: now[0]
    )
    gate.record(FOLLOWER_ID, "binlog.000002", 500)
    now[0] = 10.0  # the follower fell silent long ago (it follows the successor now)
    sure[0] = False
    assert gate.acknowledged() is None
    assert gate.limit("binlog.000002") == 500
    assert gate.limit("binlog.000001") is None  # acknowledged whole
    assert gate.limit("binlog.000003") == 0
    assert gate.give_up("binlog.000002", 500, 5.0) is False and not gate.degraded
    sure[0] = True
    assert gate.limit("binlog.000002") == 0  # no live acknowledgement: wait, then give up
    assert gate.give_up("binlog.000002", 500, 0.3) is True and gate.degraded
    assert gate.limit("binlog.000003") is None
    sure[0] = False  # degraded, then in doubt: acknowledged data only again
    assert gate.limit("binlog.000003") == 0 and gate.limit("binlog.000002") == 500


async def test_a_degraded_gate_serves_no_further_than_its_served_bound():
    """HA (docs/dumper.md, "A degraded gate's bound"): a degraded gate with a served bound (as
    recorded in the GMS) serves up to it and no further; a dump held there asks for more
    (`wants`, `asked`), and a higher bound lets it go on. No bound recorded yet ((0, 0)):
    acknowledged data only. A gate without a bound (outside HA) serves all, as before."""
    now = [0.0]
    bound = [(0, 0)]
    gate = AckGate(
        [FOLLOWER_ID], live_ms=200, wait_ms=300, clock=lambda: now[0], bound=lambda: bound[0]
    )
    gate.record(FOLLOWER_ID, "binlog.000002", 500)
    assert gate.give_up("binlog.000002", 500, 0.3) is False  # degraded, but held at (0, 0)
    assert gate.degraded and gate.asked.is_set() and gate.wants == (2, 500)
    assert gate.limit("binlog.000002") == 500  # the acknowledgement still counts
    gate.asked.clear()
    bound[0] = (2, 900)
    gate.bound_changed()
    assert gate.limit("binlog.000002") == 900 and gate.limit("binlog.000003") == 0
    assert gate.give_up("binlog.000002", 700, 0.3) is True  # below the bound: serve on
    assert gate.give_up("binlog.000002", 900, 0.3) is False and gate.wants == (2, 900)
    bound[0] = (3, 4)
    assert gate.limit("binlog.000002") is None and gate.limit("binlog.000003") == 4
    gate.served("binlog.000003", 4)
    gate.record(FOLLOWER_ID, "binlog.000003", 4)  # the follower holds all served: re-armed
    assert not gate.degraded
    free = AckGate([FOLLOWER_ID], live_ms=200, wait_ms=300, clock=lambda: now[0])
    assert free.give_up("binlog.000002", 500, 0.3) is True
    assert free.limit("binlog.000009") is None
