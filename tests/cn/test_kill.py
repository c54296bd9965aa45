"""A CN process SIGKILLed at every step of the commit protocol (several times each), then
`cdc cn recover`: every transaction is all-or-nothing on all DNs and the total is unchanged."""

from __future__ import annotations

import os
import time

from cdc_equipment.cn import ComputeNode
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.crash_points import STEPS
from tests.cn.conftest import cli, xa_prepared
from tests.cn.test_transfer import _check_commit_records

# Kills per step, each after another number of commits (1 + (i * 7) % 12); scale for a long run.
ROUNDS = int(os.environ.get("CDC_TEST_KILL_ROUNDS", "2"))
ACCOUNTS = 200


async def test_kill_at_every_protocol_step_then_recover(cn_config, cn_config_file):
    cn = ComputeNode(cn_config)
    await cn.start()
    workload = TransferWorkload(cn, db="kill_test", accounts=ACCOUNTS, partitions=6)
    try:
        await workload.setup()
        assert await workload.totals() == (ACCOUNTS, workload.expected_total)
    finally:
        await cn.close()

    started = time.monotonic()
    kills = 0
    for i, step in enumerate(STEPS * ROUNDS):
        env = {**os.environ, "CDC_CN_CRASH_AT": step, "CDC_CN_CRASH_AFTER": str(1 + (i * 7) % 12)}
        res = cli(
            "workload", "transfer", "--threads", "4", "--duration", "20", "--db", "kill_test",
            "--accounts", str(ACCOUNTS), "--config", str(cn_config_file), env=env,
        )  # fmt: skip
        assert res.returncode == -9, f"{step}: the CN did not crash: {res.stdout}{res.stderr}"
        kills += 1
        rec = cli("cn", "recover", "--config", str(cn_config_file))
        assert rec.returncode == 0, f"after a kill at {step}: {rec.stdout}{rec.stderr}"
        assert xa_prepared(cn_config) == {1: [], 2: [], 3: []}, step
        if step in ("after_primary_record", "after_records"):  # the crashed txn is decided
            assert "committed 0," not in rec.stdout, f"{step}: nothing to commit? {rec.stdout}"

        cn = ComputeNode(cn_config)
        await cn.start(recover=False)
        try:
            assert await TransferWorkload(cn, db="kill_test", accounts=ACCOUNTS).totals() == (
                ACCOUNTS,
                workload.expected_total,
            ), f"total changed after a kill at {step}"
        finally:
            await cn.close()
    assert kills == len(STEPS) * ROUNDS
    _check_commit_records(cn_config)
    print(f"{kills} kills + recoveries in {time.monotonic() - started:.1f}s")


CRASHING_HEARTBEAT = """
import asyncio, sys
from cdc_equipment.cn import ComputeNode
from cdc_equipment.crash_points import CrashPoints
from cdc.config import load

async def main():
    cn = ComputeNode(load(sys.argv[1]), crash_points=CrashPoints("after_primary_record"))
    await cn.start(recover=False)
    await cn.heartbeat_once()

asyncio.run(main())
"""


def test_a_recovered_heartbeat_is_logged_as_a_heartbeat(cn_config, cn_config_file):
    """Recovery logs what it commits in the ground truth with its real kind: a heartbeat logged
    as "txn" made `cdc verify-binlog` report it missing from the global binlog."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    res = subprocess.run(
        [sys.executable, "-c", CRASHING_HEARTBEAT, str(cn_config_file)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert res.returncode == -9, res.stderr
    crashed = {x.txn_id for branches in xa_prepared(cn_config).values() for x in branches}
    assert crashed, "the heartbeat left no prepared branch"
    rec = cli("cn", "recover", "--config", str(cn_config_file))
    assert rec.returncode == 0, rec.stdout + rec.stderr
    lines = Path(cn_config.cn.ground_truth_log).read_text().splitlines()
    recovered = [e for e in map(json.loads, lines) if e["txn_id"] in crashed and e["recovered"]]
    assert [e["kind"] for e in recovered] == ["heartbeat"] * len(crashed), recovered


STUCK_HEARTBEAT = """
import asyncio, os, signal, sys
from cdc_equipment.cn import ComputeNode
from cdc_equipment.crash_points import CrashPoints
from cdc.config import load

class Stuck(CrashPoints):
    def reached(self, step):
        if step == "after_prepare":
            print("prepared", flush=True)
            os.kill(os.getpid(), signal.SIGSTOP)  # alive, its DN sessions open: stuck

async def main():
    cn = ComputeNode(load(sys.argv[1]), crash_points=Stuck())
    await cn.start(recover=False)
    await cn.heartbeat_once()

asyncio.run(main())
"""


def test_recovery_ends_an_owner_that_holds_its_prepared_branch_attached(cn_config, cn_config_file):
    """Issue 39: a writer cut off from the GMS but not from its DNs (a fenced dumper's
    heartbeat, waiting for a commit TSO) keeps its prepared branches attached to its open
    sessions: XA ROLLBACK from elsewhere answers XAER_NOTA, and the branch held the DN's
    MergeSource, and so the whole global binlog, for as long as that process lived. Recovery
    decides the outcome first (a tombstone: the owner can no longer commit), then ends the
    session the xid names, and settles the branch it leaves detached."""
    import subprocess
    import sys
    from pathlib import Path

    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_HEARTBEAT, str(cn_config_file)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert proc.stdout.readline().strip() == "prepared"
        held = [x for branches in xa_prepared(cn_config).values() for x in branches]
        assert held and all(x.conn_id for x in held), held  # each names its owner session
        rec = cli("cn", "recover", "--wait", "10", "--config", str(cn_config_file))
        assert rec.returncode == 0, rec.stdout + rec.stderr
        assert "rolled back 1" in rec.stdout and "left in doubt" not in rec.stdout, rec.stdout
        assert not any(xa_prepared(cn_config).values())
    finally:
        proc.kill()
        proc.wait()
