"""`cdc ha reseed`'s refusals (dumper/ha/reseed.py), on the in-memory lease store: each says
why and leaves the follower's copy as it was. The re-seed itself, with real processes, is
tests/chaos/test_dumper_ha_reseed.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog_writer import layout
from cdc.config import DumperPeer
from dumper.ha.reseed import STAGING, ReseedError, reseed
from tests.dumper.ha.fakes import FakeGms, FakeLeaseStore
from tests.dumper.pipeline.fakes import config
from tests.dumper.test_retention import write_files
from topology import Member


def follower(tmp_path, dumper_id: int = 2):
    cfg = config(tmp_path / "unused")
    cfg.dumper.peers = [
        DumperPeer(i, port=3300 + i, binlog_dir=str(tmp_path / f"d{i}")) for i in (1, 2)
    ]
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
    gms = FakeGms()
    gms.hold(1, "127.0.0.1:3301", lease_ms=60_000)
    store = FakeLeaseStore(gms, 2)
    await store.report(Member(2, "127.0.0.1:3302", "follower", 1, "binlog.000005", 4, 0.0))
    await refused(follower(tmp_path), gms, r"dumper 2 reported .* stop it first")


async def test_a_leader_that_does_not_answer(tmp_path):
    gms = FakeGms()
    gms.hold(1, "127.0.0.1:1", lease_ms=60_000)  # nothing listens there
    await refused(follower(tmp_path), gms, "copying from dumper 1 at 127.0.0.1:1 failed")
