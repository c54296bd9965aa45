"""`cdc ha reseed`'s refusals (dumper/ha/reseed.py), on the in-memory lease store: each says
why and leaves the follower's copy as it was. The re-seed itself, with real processes, is
tests/chaos/test_dumper_ha_reseed.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from binlog_writer import layout
from cdc.config import DumperPeer
from cdc.tasks import cancel_and_wait
from dumper.ha.reseed import STAGING, ReseedError, reseed
from tests.dumper.ha.fakes import FakeGms, FakeLeaseStore
from tests.dumper.pipeline.fakes import config
from tests.dumper.test_retention import write_files
from topology import Member

LEASE_MS = 700
RUNNING = Member(2, "127.0.0.1:3302", "follower", 1, "binlog.000005", 4, 0.0)  # its report


def follower(tmp_path, dumper_id: int = 2):
    cfg = config(tmp_path / "unused")
    cfg.dumper.peers = [
        DumperPeer(i, port=3300 + i, binlog_dir=str(tmp_path / f"d{i}")) for i in (1, 2)
    ]
    cfg.dumper.lease_ms = LEASE_MS
    cfg = cfg.for_dumper(dumper_id)
    (tmp_path / f"d{dumper_id}").mkdir()
    write_files(tmp_path / f"d{dumper_id}").close()
    return cfg


async def refused(cfg, gms: FakeGms, match: str) -> None:
    directory = Path(cfg.dumper.binlog_dir)
    before = layout.read_index(directory, "binlog")
    with pytest.raises(ReseedError, match=match):
        await reseed(cfg, FakeLeaseStore(gms, 99))
    assert layout.read_index(directory, "binlog") == before
    assert not (directory / STAGING).exists()


async def test_no_leader(tmp_path):
    await refused(follower(tmp_path), FakeGms(), "no dumper leads now")


async def test_the_leader_itself(tmp_path):
    gms = FakeGms()
    gms.hold(2, "127.0.0.1:3302", lease_ms=60_000)
    await refused(follower(tmp_path), gms, "dumper 2 leads")


async def test_a_follower_that_runs(tmp_path):
    """It reports every renew interval: still reporting after a lease, it runs."""
    gms = FakeGms()
    gms.hold(1, "127.0.0.1:3301", lease_ms=60_000)
    store = FakeLeaseStore(gms, 2)

    async def report() -> None:
        while True:
            await store.report(RUNNING)
            await asyncio.sleep(0.05)

    await store.report(RUNNING)
    reporter = asyncio.create_task(report())
    try:
        await refused(follower(tmp_path), gms, r"dumper 2 is running .* stop it first")
    finally:
        await cancel_and_wait([reporter])


async def test_a_follower_just_stopped_is_waited_for(tmp_path):
    """Its last report younger than a lease: the re-seed waits for the lease, then goes on
    (here to a leader that does not answer)."""
    gms = FakeGms()
    gms.hold(1, "127.0.0.1:1", lease_ms=60_000)  # nothing listens there
    await FakeLeaseStore(gms, 2).report(RUNNING)
    cfg = follower(tmp_path)
    started = time.monotonic()
    await refused(cfg, gms, "copying from dumper 1")
    assert time.monotonic() - started >= cfg.dumper.lease_ms / 1000


async def test_a_leader_that_does_not_answer(tmp_path):
    gms = FakeGms()
    gms.hold(1, "127.0.0.1:1", lease_ms=60_000)  # nothing listens there
    await refused(follower(tmp_path), gms, "copying from dumper 1 at 127.0.0.1:1 failed")
