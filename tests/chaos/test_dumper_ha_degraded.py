"""A degraded gate's bound (docs/dumper.md), with real processes: the fork the nemesis found
(seed 1795945531) cannot happen. Two dumpers under transfer traffic; the follower is
SIGKILLed, so the leader's ack gate gives up and serves a consumer past the follower's copy —
no further than the bound it recorded in the GMS first. The leader is SIGKILLed too; the
follower, started again alone, must not take the next term from its shorter copy: it waits,
saying so once (log, `cdc status`). The old leader comes back and leads; the follower copies
from it; every event the consumer was served is, byte for byte, in the final leader's files.
~40 s."""

from __future__ import annotations

import asyncio

import pytest

from dumper.ha.election import order
from tests.chaos.dumpers import (
    LEASE_MS,
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


@pytest.fixture
def degraded_setup(tmp_path):
    def tune(cfg):
        cfg.dumper.ack_wait_ms = ACK_WAIT_MS

    with two_dumpers(tmp_path, dns=1, tune=tune) as setup:
        yield setup


async def test_a_shorter_copy_never_takes_over_from_a_degraded_leader(degraded_setup, tmp_path):
    cfg, config_path = degraded_setup
    port = {p.id: p.port for p in cfg.dumper.peers}
    cn, workload = await transfer_cn(cfg)
    dumpers = Dumpers(config_path, tmp_path)
    load_task, stop_load = background_load(workload)
    consumer = None
    try:
        dumpers.start(1)
        await dumpers.wait(lambda: dumpers.role(1) == "leader", 60, "dumper 1 did not lead")
        dumpers.start(2)
        await dumpers.wait(lambda: dumpers.role(2) == "follower", 60, "dumper 2 does not follow")
        await dumpers.wait(
            lambda: copy_end(dumpers.binlog(2)) > (1, 4), 60, "dumper 2 copies nothing"
        )
        consumer = Consumer(port[1])
        await dumpers.wait(lambda: consumer.events, 30, "the consumer reads nothing")

        # The follower dies: the leader's gate gives up and serves past its copy, to the bound.
        dumpers.kill(2)
        held = copy_end(dumpers.binlog(2))
        await dumpers.wait(
            lambda: consumer.end() > held and "served_bound" in dumpers.status(1).get("ha", {}),
            30,
            "the degraded leader served nothing past the follower's copy",
        )
        ha = dumpers.status(1)["ha"]
        assert ha["ack_gate_degraded"], ha
        # Everything served is under a bound recorded first (the status may be a second old).
        await asyncio.sleep(1.5)
        before = consumer.end()
        await asyncio.sleep(3)  # degraded: the consumer goes on, a GMS write per step
        ha = dumpers.status(1)["ha"]
        print(
            f"degraded 3 s: the consumer read {served_bytes(before, consumer.end())} bytes more; "
            f"served bound {ha['served_bound']}"
        )
        assert consumer.end() > before, "a degraded leader serves on, to its growing bound"
        dumpers.kill(1)
        await consumer.close()
        served = consumer.end()
        assert served > held

        # The follower alone: the lease runs free, but its copy ends before the bound.
        dumpers.start(2)
        await asyncio.sleep(LEASE_MS / 1000 + 6)
        status = dumpers.status(2).get("ha", {})
        assert status.get("role") != "leader", status
        waits = status.get("takeover_waits_for")
        assert waits and waits["holder"] == 1 and waits["term"] >= 1, status
        assert order(waits["served_file"], waits["served_position"]) >= served
        log = (tmp_path / "dumpers.log").read_text(errors="replace")
        assert log.count("dumper 2: not taking over") == 1, dumpers.tail()

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
            lambda: copies_identical(dumpers.binlog(1), dumpers.binlog(2)),
            60,
            "the copies differ",
        )
        assert not (bad := not_in(consumer.events, dumpers.binlog(1))), bad[:5]
        log = (tmp_path / "dumpers.log").read_text(errors="replace")
        assert "taking over although" not in log
    finally:
        stop_load.set()
        await end_run(dumpers, cn, load_task, consumer)
