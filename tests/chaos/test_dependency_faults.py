"""The pipeline rides through the faults of what it depends on (docs/faults.md), under `transfer`
+ `orders` load with a MariaDB replica following the dumper: the GMS SIGKILLed and started
again, the GMS SIGSTOPped for longer than the HA lease, the binlog file system (a tmpfs of its
own) full and then grown, the spill directory (a tmpfs of 512 KB, `spill_mb = 1`) too small
for a large transaction and then grown. Each time the pipeline process stays up, shows the pause in its
status while it lasts, writes again by itself, and then: every binlog file passes
`mariadb-binlog --verify-binlog-checksum`, `cdc verify-binlog` finds every transaction exactly
once, `cdc check` finds the replica equal.

Needs root (mount); CDC_FAULT_S scales how long each fault lasts (default 6 s)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_equipment.processes import PidFile
from tests.chaos.harness import WORKLOADS, Chaos

FAULT_S = float(os.environ.get("CDC_FAULT_S", "6"))

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="mounts a tmpfs: needs root"
)


def mount_tmpfs(path: Path, size_mb: float) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={int(size_mb * 1024)}k", "tmpfs", str(path)],
        check=True,
    )


def resize_tmpfs(path: Path, size_kb: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_kb}k", str(path)], check=True)


def used_kb(path: Path) -> int:
    usage = shutil.disk_usage(path)
    return (usage.total - usage.free) // 1024


@pytest.fixture(scope="module")
def chaos(tmp_path_factory):
    directory = tmp_path_factory.mktemp("faults")
    binlog = directory / "binlog"  # the harness's binlog_dir: a file system of its own here
    spill = directory / "spill"
    mount_tmpfs(binlog, 256)
    mount_tmpfs(spill, 0.5)
    c = None
    try:
        c = Chaos(directory)
        c.cfg.pipeline.spill_dir = str(spill)
        c.cfg.pipeline.spill_mb = 1  # what the harness's workloads write stays below it
        c.cfg.dump(c.config_path)
        c.start_pipeline()
        c.attach_replica()
        yield c
    finally:
        if c is not None:
            c.close()
        for path in (binlog, spill):
            subprocess.run(["umount", "-l", str(path)], check=False)


def start_load(c: Chaos) -> None:
    for name in WORKLOADS:
        c.start_workload(name)


def status(c: Chaos) -> dict:
    try:
        return json.loads((c.state_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}


async def wait_written(c: Chaos, more: int = 100, timeout: float = 60) -> None:
    """Until the load has written `more` transactions (the workload processes are up)."""
    first = status(c).get("transactions", 0)
    deadline = time.monotonic() + timeout
    while status(c).get("transactions", 0) < first + more:
        c.assert_pipeline_alive()
        assert time.monotonic() < deadline, (
            f"the load wrote nothing: {status(c)}\n{c.servers_down()}"
        )
        await asyncio.sleep(0.2)


async def wait_paused(c: Chaos, *reasons: str, timeout: float = 60) -> dict:
    """Until the status names a pause for one of `reasons` (the process alive meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        c.assert_pipeline_alive()
        pauses = [p for p in status(c).get("pauses", []) if p["reason"] in reasons]
        if pauses:
            return pauses[0]
        assert time.monotonic() < deadline, f"no {reasons} pause in {status(c)}\n{c.servers_down()}"
        await asyncio.sleep(0.2)


async def wait_resumed(c: Chaos, timeout: float = 120) -> None:
    """Until nothing is paused and a transaction was written after that."""
    deadline = time.monotonic() + timeout
    while True:
        c.assert_pipeline_alive()
        st = status(c)
        if st and not st.get("pauses") and st.get("last_commit_at", 0) > time.time() - 5:
            return
        assert time.monotonic() < deadline, f"still paused: {st}\n{c.servers_down()}"
        await asyncio.sleep(0.3)


def verify_checksums(c: Chaos) -> int:
    files = sorted(Path(c.cfg.dumper.binlog_dir).glob("binlog.[0-9]*"))
    for f in files:
        res = subprocess.run(
            ["mariadb-binlog", "--no-defaults", "--verify-binlog-checksum", str(f)],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, f"{f.name}: {res.stderr[-2000:]}"
    return len(files)


async def prove(c: Chaos, what: str) -> str:
    proof = await c.prove(what)
    files = await asyncio.to_thread(verify_checksums, c)
    c.assert_pipeline_alive()
    return f"{proof}; {files} files pass --verify-binlog-checksum"


async def ride_through(
    c: Chaos,
    what: str,
    reasons: tuple[str, ...],
    fault: Callable[[], object],
    undo: Callable[[], object],
    *,
    lasts: float = FAULT_S,
    timeout: float = 60,
) -> None:
    """Under load: `fault()`, a pause for one of `reasons` in the status (within `timeout`),
    `lasts` seconds with the process alive, `undo()`; then it writes again by itself and the
    proof passes; prints a summary line."""
    start_load(c)
    await wait_written(c)
    await asyncio.to_thread(fault)
    try:
        pause = await wait_paused(c, *reasons, timeout=timeout)
        await asyncio.sleep(lasts)
        c.assert_pipeline_alive()
    finally:
        await asyncio.to_thread(undo)
    await wait_resumed(c)
    proof = await prove(c, what)
    print(f"\nFAULT {what} {lasts:.0f}s: paused ({pause['detail'][:80]}); {proof}")


async def test_gms_killed_and_restarted(chaos):
    gms = chaos.cluster.gms
    # SIGKILL: a host crash of the metadata DB. No CN commits without its TSO: the heartbeat
    # shows it at once, checkpoints when they are due.
    await ride_through(chaos, "GMS SIGKILL", ("gms", "heartbeat"), gms.kill, gms.start)


async def test_gms_stopped_longer_than_the_lease(chaos):
    gms = chaos.cluster.gms
    await ride_through(
        chaos,
        "GMS SIGSTOP",
        ("gms", "heartbeat"),
        lambda: gms.kill(signal.SIGSTOP),
        lambda: gms.kill(signal.SIGCONT),
        lasts=max(FAULT_S, chaos.cfg.dumper.lease_ms / 1000 + 2),
    )


async def test_binlog_file_system_full_then_grown(chaos):
    binlog = Path(chaos.cfg.dumper.binlog_dir)
    await ride_through(
        chaos,
        "binlog disk full",
        ("binlog_disk_full",),
        lambda: resize_tmpfs(binlog, used_kb(binlog) + 2048),  # the load fills 2 MB in seconds
        lambda: resize_tmpfs(binlog, 256 * 1024),
        timeout=90,
    )


async def test_spill_directory_full_then_grown(chaos):
    c = chaos
    spill = Path(c.cfg.pipeline.spill_dir)
    # ~2 MB per DN in one transaction: spilled (spill_mb = 1), and 512 KB do not hold it.
    big = ["workload", "orders", "--threads", "1", "--duration", "3600", "--db", "big"]
    await ride_through(
        c,
        "spill disk full",
        ("spill_disk_full",),
        lambda: c.spawn("big", [*big, "--large-rows", "40000", "--large-every", "1"]),
        lambda: resize_tmpfs(spill, 64 * 1024),
        timeout=120,
    )


async def test_background_service_restarted_after_a_crash(chaos):
    """`cdc start --background` under load: the service SIGKILLed is started again by its
    supervisor, `cdc status` says so, and nothing is lost or repeated."""
    c = chaos
    await c.kill("pipeline")  # the harness's foreground one: the supervised one takes over
    del c.procs["pipeline"]
    await asyncio.to_thread(c.run_cdc, "start", "--background")
    try:
        pid_file = PidFile(c.state_dir / "pipeline.pid")
        first = pid_file.running().pid
        start_load(c)
        await asyncio.sleep(2)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:  # the supervisor starts it again (after 1 s) and it serves again: until
            # its first status `cdc status` fails (the killed one's status file may still be
            # there while the new process starts, which is slow on a loaded machine). Asked
            # only once a new process runs and a status file is there: each `cdc status` is a
            # Python start, seconds on a loaded machine (a run of them took 9 s).
            await asyncio.sleep(0.3)
            pid = getattr(pid_file.running(), "pid", first)
            if pid != first and (c.state_dir / "status.json").exists():
                res = await asyncio.to_thread(c.cdc_result, "status", timeout=60)
                if res.returncode == 0:
                    shown = res.stdout
                    break
            assert time.monotonic() < deadline, c.log_tail()
        assert "restarted 1 time(s) after crashing; last: killed by signal 9" in shown, shown
        c.procs["pipeline"] = _Pid(pid)  # what the harness's proof watches
        proof = await prove(c, "service SIGKILL")
        print(f"\nFAULT service SIGKILL under `cdc start --background`: {proof}")
    finally:
        await asyncio.to_thread(c.run_cdc, "stop")
        c.procs.pop("pipeline", None)


class _Pid:
    """A process the harness did not start, as far as `Chaos.assert_pipeline_alive` asks."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode = None

    def poll(self) -> int | None:
        try:
            os.kill(self.pid, 0)
        except OSError:
            self.returncode = -1
        return self.returncode
