"""A degraded gate's bound with several streams (docs/streams.md, "HA followers"): the fork of
test_dumper_ha_degraded.py, per stream. Two dumpers of a 2-stream binlog under transfer
traffic (`bank` pinned to stream 1); the follower and all its processes are SIGKILLed, so the
leader's stream 1 gate gives up and serves a consumer of stream 1 past the follower's copy of
it — no further than the bound its stream process recorded in the GMS first, in stream 1's
row of the term. The leader dies with all its processes too; the follower, started again
alone, must not take the next term from its shorter copy of stream 1: it waits, naming the
stream, once (log, `cdc status`). The old leader comes back and leads; every stream's copies
end identical, and every event the consumer was served is, byte for byte, in the final
leader's stream 1. ~60 s."""

from __future__ import annotations

import asyncio

import pytest

from cdc.streams import stream_dir
from dumper.ha.election import order
from tests.chaos.dumpers import (
    Consumer,
    Dumpers,
    copies_identical,
    copy_end,
    end_run,
    not_in,
    served_bytes,
    two_dumpers,
)
from tests.chaos.transfer_setup import background_load, transfer_cn

ACK_WAIT_MS = 300
STREAMS = 2
K = 1  # the stream `bank` (the transfers) is pinned to


@pytest.fixture
def streams_setup(tmp_path):
    def tune(cfg):
        cfg.dumper.ack_wait_ms = ACK_WAIT_MS
        cfg.dumper.stream_tables = {"bank": K}

    with two_dumpers(tmp_path, dns=1, tune=tune, streams=STREAMS) as setup:
        yield setup


async def test_a_shorter_stream_copy_never_takes_over_from_a_degraded_leader(
    streams_setup, tmp_path
):
    cfg, config_path = streams_setup
    d = {i: cfg.for_dumper(i).dumper for i in (1, 2)}

    def copy(i: int, stream: int = K):
        return stream_dir(d[i], stream)

    cn, workload = await transfer_cn(cfg)
    dumpers = Dumpers(config_path, tmp_path)
    load_task, stop_load = background_load(workload)
    consumer = None
    try:
        dumpers.start(1)
        await dumpers.wait(
            lambda: dumpers.role(1) == "leader" and dumpers.stream_status(1, K),
            60,
            "dumper 1 did not lead",
        )
        dumpers.start(2)
        await dumpers.wait(lambda: dumpers.role(2) == "follower", 60, "dumper 2 does not follow")
        await dumpers.wait(lambda: copy_end(copy(2)) > (1, 4), 60, "dumper 2 copies nothing")
        consumer = Consumer(d[1].port + 1 + K)  # stream K of the leader
        await dumpers.wait(lambda: consumer.events, 30, "the consumer reads nothing")

        # The follower dies: stream K's gate gives up and serves past its copy, to the bound.
        dumpers.kill(2, group=True)
        held = copy_end(copy(2))

        def bound() -> dict | None:
            return dumpers.stream_status(1, K).get("ha", {}).get("served_bound")

        await dumpers.wait(
            lambda: consumer.end() > held and bound(),
            30,
            "the degraded leader served nothing past the follower's copy",
        )
        assert dumpers.stream_status(1, K)["ha"]["ack_gate_degraded"]
        await asyncio.sleep(1.0)
        before = consumer.end()
        await asyncio.sleep(2)  # degraded: the consumer goes on, a GMS write per step
        print(
            f"degraded 2 s: the consumer read {served_bytes(before, consumer.end())} bytes more "
            f"of stream {K}; its served bound {bound()}"
        )
        assert consumer.end() > before, "a degraded stream serves on, to its growing bound"
        dumpers.kill(1, group=True)
        await consumer.close()
        served = consumer.end()
        assert served > held

        # The follower alone: the lease runs free, but its copy of stream K ends before the
        # bound stream K's process recorded.
        dumpers.start(2)
        waits = await dumpers.wait(
            lambda: dumpers.status(2).get("ha", {}).get("takeover_waits_for"),
            60,
            "dumper 2 does not wait",
        )
        assert (waits["stream"], waits["holder"]) == (K, 1), waits
        assert order(waits["served_file"], waits["served_position"]) >= served
        await asyncio.sleep(2)  # it goes on waiting, and says so once
        assert dumpers.role(2) != "leader", dumpers.status(2)
        log = (tmp_path / "dumpers.log").read_text(errors="replace")
        said = [line for line in log.splitlines() if "dumper 2: not taking over" in line]
        assert len(said) == 1 and f"stream {K}: term" in said[0], dumpers.tail()
        print(said[0])

        # The old leader comes back with everything it served: it leads, the follower copies.
        dumpers.start(1)
        await dumpers.wait(
            lambda: dumpers.role(1) == "leader" and dumpers.role(2) == "follower",
            60,
            "the old leader did not lead again",
        )
        stop_load.set()
        await load_task
        await dumpers.wait(
            lambda: all(copies_identical(copy(1, i), copy(2, i)) for i in range(STREAMS)),
            60,
            "the stream copies differ",
        )
        assert not (bad := not_in(consumer.events, copy(1))), bad[:5]
        log = (tmp_path / "dumpers.log").read_text(errors="replace")
        assert "taking over although" not in log
    finally:
        stop_load.set()
        await end_run(dumpers, cn, load_task, consumer)
