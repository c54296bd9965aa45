"""Under `transfer` + `orders` load (separate CN processes) with the pipeline running: SIGKILL CN
processes at random moments and at random steps of the commit protocol, SIGKILL and restart DNs,
SIGSTOP DNs for longer than the heartbeat interval and the idle timeout. After each kind
`cdc verify-binlog` (0 lost, 0 duplicated, 0 reordered against the CN ground truth) and
`cdc check` (a MariaDB replica of the dumper equals the logical tables) pass.

`pytest -s` prints one summary line per kind; CDC_CHAOS_KILLS sets the kills per kind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cdc_equipment.crash_points import STEPS
from tests.chaos.harness import KILLS, WORKLOADS, Chaos, running_chaos


@pytest.fixture(scope="module")
def chaos(tmp_path_factory):
    with running_chaos(tmp_path_factory.mktemp("chaos")) as c:
        yield c


def start_load(c: Chaos) -> None:
    for name in WORKLOADS:
        c.start_workload(name)


async def recover_now(c: Chaos) -> None:
    """`cdc cn recover` while the load runs (its tombstones race live commits; both are safe)."""
    await asyncio.to_thread(c.run_cdc, "cn", "recover", "--wait", "2", check=False)


def wait_for_exit(proc, timeout: float) -> None:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


async def test_cn_processes_killed_mid_commit(chaos):
    c = chaos
    start_load(c)
    crash_env: dict[str, str | None] = dict.fromkeys(WORKLOADS)  # the step each one will die at
    at_step: Counter[str] = Counter()
    recoveries = 0
    for _ in range(KILLS):
        name = c.rng.choice(list(WORKLOADS))
        proc, step = c.procs[name], crash_env[name]
        if step:  # let it reach its step (process start + a few commits)
            await asyncio.to_thread(wait_for_exit, proc, 15)
        else:
            await asyncio.sleep(c.rng.uniform(0.5, 2.0))
        if step and proc.poll() == -signal.SIGKILL:
            at_step[step] += 1  # it killed itself at that step of the commit protocol
        else:
            await c.kill(name)
            c.kills["random moment"] += 1
        if c.rng.random() < 0.5:
            await recover_now(c)
            recoveries += 1
        # Half the restarts die by themselves at a random step of the commit protocol.
        crash_env[name] = c.rng.choice(STEPS) if c.rng.random() < 0.5 else None
        env = {}
        if crash_env[name]:
            env = {
                "CDC_CN_CRASH_AT": crash_env[name],
                "CDC_CN_CRASH_AFTER": str(c.rng.randint(1, 20)),
            }
        c.start_workload(name, env)
        c.assert_pipeline_alive()
    await asyncio.sleep(1)
    proof = await c.prove("CN kills")
    kills = c.kills["random moment"] + sum(at_step.values())
    assert kills == KILLS
    steps = ", ".join(f"{s} x{n}" for s, n in sorted(at_step.items())) or "none"
    print(
        f"\nCHAOS CN: {kills} CN SIGKILLs ({c.kills['random moment']} at random moments, "
        f"{sum(at_step.values())} at protocol steps: {steps}); {recoveries} recoveries under "
        f"load; {proof}; all `cdc cn recover` runs so far: {dict(c.settled)}"
    )


async def test_dns_killed_and_restarted_under_load(chaos):
    c = chaos
    since = c.truth_size()
    start_load(c)
    await c.wait_load_writes(since)  # no DN killed while a workload sets up
    restarts = []
    for _ in range(KILLS):
        await asyncio.sleep(c.rng.uniform(1.0, 3.0))
        dn = c.rng.choice(c.cluster.dns)
        await asyncio.to_thread(dn.kill)  # SIGKILL by the pid our cluster recorded
        c.kills[dn.name] += 1
        await asyncio.sleep(c.rng.uniform(0.0, 1.5))
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.to_thread(dn.start)
        restarts.append(loop.time() - started)
        if c.rng.random() < 0.5:
            await recover_now(c)
        c.assert_pipeline_alive()
    await asyncio.sleep(1)
    proof = await c.prove("DN kills")
    per_dn = ", ".join(f"{n} x{k}" for n, k in sorted(c.kills.items()) if n.startswith("dn"))
    print(
        f"\nCHAOS DN: {len(restarts)} DN SIGKILLs ({per_dn}), restart "
        f"{min(restarts):.1f}-{max(restarts):.1f}s; {proof}; all `cdc cn recover` runs so far: "
        f"{dict(c.settled)}"
    )


async def test_dns_paused_longer_than_heartbeat_and_idle_timeout(chaos):
    c = chaos
    since = c.truth_size()
    start_load(c)
    await c.wait_load_writes(since)  # no DN paused while a workload sets up
    idle_s = c.cfg.pipeline.dn_idle_timeout_ms / 1000
    floor = max(
        idle_s, c.cfg.pipeline.dn_heartbeat_ms / 1000, c.cfg.cn.heartbeat_interval_ms / 1000
    )
    paused = []
    for _ in range(KILLS):
        await asyncio.sleep(c.rng.uniform(0.5, 2.0))
        dn = c.rng.choice(c.cluster.dns)
        pause = c.rng.uniform(floor + 0.2, floor + 2.0)
        dn.kill(signal.SIGSTOP)
        try:
            await asyncio.sleep(pause)
        finally:
            dn.kill(signal.SIGCONT)
        paused.append(pause)
        c.assert_pipeline_alive()
    await asyncio.sleep(1)
    proof = await c.prove("DN pauses")
    print(
        f"\nCHAOS PAUSE: {len(paused)} DN SIGSTOPs of {min(paused):.1f}-{max(paused):.1f}s "
        f"(idle timeout {idle_s:.1f}s); {proof}"
    )


# Three CN processes write (each its own workload); DNs are added and DDL is issued by yet other
# processes; workload processes are SIGKILLed and restarted at random moments meanwhile.
SCALE_SECONDS = float(os.environ.get("CDC_CHAOS_SCALE_S", "30"))
SCALE_DNS = int(os.environ.get("CDC_CHAOS_SCALE_DNS", "1"))  # DNs added: 3 -> 4
MANY = {
    "transfer": WORKLOADS["transfer"],
    "orders": WORKLOADS["orders"],
    "ddl-mix": ["--threads", "2"],
}
DDL = (
    "ALTER TABLE bank.accounts ADD COLUMN note VARCHAR(20) NULL",
    "ALTER TABLE shop.customers ADD INDEX by_name (name)",
    "ALTER TABLE bank.accounts DROP COLUMN note",
    "ALTER TABLE shop.customers DROP INDEX by_name",
)
EXPECTED_ERRORS = ("TransactionAborted", "1205", "1213", "1614")  # retries, lock waits, deadlocks


async def test_scale_out_and_ddl_while_cn_processes_write(chaos):
    c = chaos
    loop = asyncio.get_running_loop()
    end = loop.time() + SCALE_SECONDS
    outputs: dict[str, list[Path]] = {name: [] for name in MANY}

    def start(name: str) -> None:
        out = c.dir / f"{name}.{len(outputs[name])}.out"
        outputs[name].append(out)
        remaining = max(end - loop.time(), 3.0)
        with out.open("wb") as f:
            c.spawn(name, ["workload", name, "--duration", f"{remaining:.1f}", *MANY[name]], out=f)

    for name in MANY:
        start(name)
    kinds = ["add-dn"] * SCALE_DNS + ["ddl"] * len(DDL) + ["kill"] * max(KILLS, 2)
    c.rng.shuffle(kinds)
    ddl = iter(DDL)  # at random moments, in their order (ADD before DROP)
    steps = [(kind, next(ddl) if kind == "ddl" else None) for kind in kinds]
    gap = SCALE_SECONDS * 0.7 / len(steps)
    timings: dict[str, list[float]] = {"add-dn": [], "ddl": []}
    for kind, sql in steps:
        await asyncio.sleep(c.rng.uniform(0.3, 2 * gap))
        if kind == "kill":
            name = c.rng.choice(list(MANY))
            await c.kill(name)
            c.kills[f"{name} (scale-out run)"] += 1
            start(name)
            continue
        began = loop.time()
        if kind == "add-dn":
            dn = await asyncio.to_thread(c.add_dn)
            out = await asyncio.to_thread(c.run_cdc, "cn", "add-dn", "--dn", str(dn))
            assert f"DN {dn} added" in out and "acknowledged" in out, out
        else:
            out = await asyncio.to_thread(c.run_cdc, "cn", "ddl", sql)
            assert "DDL record at TSO" in out, out
        timings[kind].append(loop.time() - began)
        c.assert_pipeline_alive()
    for name in MANY:  # every workload runs to its end by itself
        proc = c.procs[name]
        code = await asyncio.to_thread(proc.wait, SCALE_SECONDS + 120)
        assert code == 0, f"{name} exited {code}:\n{outputs[name][-1].read_text()[-3000:]}"
    for name, runs in outputs.items():
        for out in runs:
            text = out.read_text(errors="replace")
            for line in text.splitlines():
                if "errors:" in line:
                    kinds = line.split("errors:", 1)[1]
                    unexpected = [
                        e.strip()
                        for e in kinds.split(", ")
                        if not any(ok in e for ok in EXPECTED_ERRORS)
                    ]
                    assert not unexpected, f"{name} ({out.name}): {line}"
            assert "1146" not in text and "Traceback" not in text, f"{name}: {text[-3000:]}"
    last_transfer = outputs["transfer"][-1].read_text()
    assert "(unchanged;" in last_transfer, last_transfer
    proof = await c.prove("scale-out and DDL under many CNs")
    with c.cluster.gms.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM `{c.cfg.cn.catalogue_database}`.cn_storage")
        (dns,) = cur.fetchone()
    print(
        f"\nCHAOS SCALE: {len(MANY)} CN processes, {dns} storage DNs after "
        f"{SCALE_DNS} add-dn ({', '.join(f'{t:.1f}s' for t in timings['add-dn'])}), "
        f"{len(DDL)} DDL from other processes ({', '.join(f'{t:.1f}s' for t in timings['ddl'])}), "
        f"{sum(v for k, v in c.kills.items() if 'scale-out' in k)} workload SIGKILLs; {proof}"
    )
