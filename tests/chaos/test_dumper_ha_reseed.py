"""Dumper HA retention (issue 33), with real processes: two dumpers (`cdc start --dumper-id N`)
on a throw-away cluster under transfer traffic, `expire_logs_seconds = 1` and a FlushLogs now
and then, so that every finished file is soon due.

- The follower purges its own copy by the leader's rules while it follows.
- Stopped for longer than `lease_ms`, it no longer holds files on the leader, which purges the
  one its copy continues in: started again, it cannot follow (1236) and says to re-seed it.
- `cdc ha reseed --dumper-id 2` (the command, in its own process) copies the leader's files
  while the leader serves and purges; started again, the follower follows and its copy ends
  byte-identical to the leader's (index included).
- Then it takes over from the leader: its files, re-seeded and purged, carry on the GTID
  numbering, and it answers `@@gtid_purged` / `@@gtid_executed` for them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pymysql
import pytest

from binlog_writer import layout
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from tests.chaos.dumpers import LEASE_MS, Dumpers, copies_identical, end_run, two_dumpers
from tests.chaos.transfer_setup import background_load, transfer_cn
from tests.e2e.global_binlog import read_global_binlog


@pytest.fixture
def reseed_setup(tmp_path):
    def tune(cfg):
        cfg.dumper.expire_logs_seconds = 1

    with two_dumpers(tmp_path, dns=2, tune=tune) as setup:
        yield setup


async def test_a_follower_away_past_its_lease_is_reseeded_and_follows(reseed_setup, tmp_path):
    cfg, config_path = reseed_setup
    cn, workload = await transfer_cn(cfg)
    dumpers = Dumpers(config_path, tmp_path)
    load_task, stop_load = background_load(workload)

    def files(i: int) -> list[str]:
        return layout.read_index(dumpers.binlog(i), "binlog")

    async def rotate(times: int) -> None:
        for _ in range(times):
            await cn.flush_logs()
            await asyncio.sleep(0.5)

    try:
        dumpers.start(1)
        await dumpers.wait(lambda: dumpers.role(1) == "leader", 60, "dumper 1 did not lead")
        dumpers.start(2)
        await dumpers.wait(lambda: dumpers.role(2) == "follower", 60, "dumper 2 does not follow")
        await dumpers.wait(lambda: files(2), 60, "dumper 2 copies nothing")

        # While it follows, the follower purges its copy as the leader purges its files.
        await rotate(3)
        await dumpers.wait(
            lambda: files(2) and files(2)[0] != "binlog.000001",
            30,
            "the follower purged nothing of its copy",
        )

        # Away longer than the lease: the leader purges the file its copy continues in.
        dumpers.kill(2)
        away_in = files(2)[-1]
        await asyncio.sleep(LEASE_MS / 1000 + 1)
        await rotate(3)
        # (a copy that ends with a finished file continues in the next one)
        await dumpers.wait(
            lambda: layout.file_number(files(1)[0]) > layout.file_number(away_in) + 1,
            30,
            f"the leader never purged the files after {away_in}",
        )
        dumpers.start(2)
        await dumpers.wait(
            lambda: "cdc ha reseed --dumper-id 2" in log_text(tmp_path),
            60,
            "the follower did not say that it needs a re-seed",
        )
        assert files(2)[-1] == away_in  # stuck where it was
        dumpers.kill(2)

        # One command, while the leader serves and purges (it waits for a lease without
        # reports from the dumper just stopped).
        res = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "cdc_cli.main", "ha", "reseed", "--config", config_path]
            + ["--dumper-id", "2"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        assert "dumper 2: re-seeded from dumper 1" in res.stdout, res.stdout
        assert files(2)[-1] > away_in

        dumpers.start(2)
        await dumpers.wait(lambda: dumpers.role(2) == "follower", 60, "dumper 2 does not follow")
        await rotate(2)
        stop_load.set()
        await load_task
        await cn.flush_logs()  # the last file: after every transfer
        await dumpers.wait(
            lambda: copies_identical(dumpers.binlog(1), dumpers.binlog(2)),
            60,
            "the re-seeded copy differs from the leader's files",
        )

        # The re-seeded (and purged) copy takes over and carries on the GTID numbering.
        last_before = gnos(dumpers.binlog(2))[-1]
        dumpers.kill(1)
        await dumpers.wait(lambda: dumpers.role(2) == "leader", 60, "dumper 2 did not take over")
        stop_load.clear()
        await run_workload(workload.step, threads=1, duration_s=2, stop=stop_load)
        await dumpers.wait(
            lambda: gnos(dumpers.binlog(2))[-1] > last_before, 60, "the new leader wrote nothing"
        )
        for _ in range(20):  # a moment without a purge or a write between the two reads
            seen = gnos(dumpers.binlog(2))
            purged, executed = await asyncio.to_thread(gtid_variables, cfg.dumper.peers[1].port)
            if gnos(dumpers.binlog(2)) == seen:
                break
        assert seen == list(range(seen[0], seen[-1] + 1)), "the GTIDs of the files have gaps"
        uuid = executed.split(":")[0]
        assert executed == gtid_span(uuid, seen[-1])
        assert purged == gtid_span(uuid, seen[0] - 1)
    finally:
        await end_run(dumpers, cn, load_task)


def gnos(directory) -> list[int]:
    """The GTID numbers in the files, in order (read again if a purge removed one meanwhile)."""
    for _ in range(10):
        try:
            return [
                int(g.rsplit(":", 1)[1]) for t in read_global_binlog(directory) for g in t.gtids
            ]
        except FileNotFoundError:
            time.sleep(0.1)
    raise AssertionError(f"{directory}: files keep vanishing under the reader")


def gtid_span(uuid: str, n: int) -> str:
    """`uuid:1-n` as the server prints it."""
    return "" if n == 0 else f"{uuid}:1" if n == 1 else f"{uuid}:1-{n}"


def log_text(tmp_path) -> str:
    return (tmp_path / "dumpers.log").read_text(errors="replace")


def gtid_variables(port: int) -> tuple[str, str]:
    deadline = time.monotonic() + 30
    while True:
        try:
            with (
                pymysql.connect(
                    host="127.0.0.1", port=port, user=DEFAULT_USER, password=DEFAULT_PASSWORD
                ) as conn,
                conn.cursor() as cur,
            ):
                cur.execute("SELECT @@gtid_purged, @@gtid_executed")
                purged, executed = cur.fetchone()
                return purged, executed
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
