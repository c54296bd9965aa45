"""Every command README.md shows a user, run exactly as printed, in the order a user would.

The commands run from the checkout's directory against what `make demo` starts there (var/demo
on the default ports 23400-23462, started afresh: a demo left there is stopped and removed,
as are var/cluster, var/ha and var/snap), so this module owns those ports while it runs; throw-away
clusters of other tests never take them (`cdc_equipment.local_cluster.testing.DEFAULT_CLUSTER_PORTS`). It ends
with `make stop`, checking that nothing of the demo is left running.

Long jobs are printed at small sizes (`--duration 10`, `FUZZ_EXAMPLES=20`,
`BENCH_ARGS=--quick`); the last test fails when README shows a command that no test here ran. The "Measured figures" table names
the benchmarks behind each figure at their full sizes (minutes each): those are checked to
parse exactly as printed, not run. `make test` itself is what .ci/run runs.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from cdc.config import load
from cdc_equipment.checks.downstream import run_check
from cdc_equipment.local_cluster.leftovers import leftover_processes
from cdc_equipment.local_cluster.testing import throwaway_server
from tests.bench import quick as bench_quick
from tests.readme.readme import ROOT, commands

# Slow (a demo twice, a backfill, HA takeover): minutes, not seconds, for the module.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

COMMANDS = commands()
SHOWN = {c.text for c in COMMANDS}
RAN: set[str] = set()
DEMO_CONFIG = ROOT / "var" / "demo" / "cdc.toml"
# What the README's commands leave under var/: the demo, `cdc cluster`'s, the HA example's, ...
VAR_DIRS = ("demo", "cluster", "ha", "snap")
# DEMO_DURATION=5: `make demo`'s workload at .ci/run's size (the Makefile's default is 20 s;
# the later commands need some traffic, not more).
ENV = {
    **os.environ,
    "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}",
    "DEMO_DURATION": "5",
}


@pytest.fixture(scope="module", autouse=True)
def var_removed_after(request):
    """The module's datadirs and binlogs under var/ (GBs after the demo ran twice) are removed
    once every test passed (everything they started is stopped by then); a failure keeps them."""
    yield
    if not request.session.testsfailed:
        for name in VAR_DIRS:
            shutil.rmtree(ROOT / "var" / name, ignore_errors=True)


def shown(section: str, kind: str | None = None) -> list[str]:
    return [c.text for c in COMMANDS if c.section == section and kind in (None, c.kind)]


def one(section: str, pattern: str) -> str:
    """The command of `section` matching `pattern` (exactly one)."""
    found = [t for t in shown(section) if re.search(pattern, t)]
    assert len(found) == 1, f"README, {section}: expected one command matching {pattern!r}: {found}"
    return found[0]


def run(command: str, timeout: float = 300, ok: bool = True, **kwargs) -> str:
    """`command` exactly as README prints it, in a shell in the checkout; its output."""
    assert command in SHOWN, f"not a README command: {command}"
    RAN.add(command)
    res = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=ENV,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )
    out = res.stdout + res.stderr
    if ok:
        assert res.returncode == 0, f"`{command}` exited {res.returncode}:\n{out[-4000:]}"
    return out


def follow(command: str, argv: list[str], expect: str, timeout: float = 60) -> str:
    """Start a command that never ends by itself (`--stop-never`, `blocking=True`), read its
    output until `expect` shows up, then stop it."""
    assert command in SHOWN, f"not a README command: {command}"
    RAN.add(command)
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and expect.encode() not in seen:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                seen += chunk
    finally:
        proc.kill()
        proc.wait(10)
    if expect.encode() in seen:
        return seen.decode(errors="replace")
    raise AssertionError(f"`{command}`: no {expect!r} in its output:\n{seen[-3000:]!r}")


def until(command: str, expect: str, timeout: float = 60) -> str:
    """Run `command` until its output contains `expect` (a state that takes a while)."""
    deadline = time.monotonic() + timeout
    while True:
        out = run(command)
        if expect in out or time.monotonic() > deadline:
            assert expect in out, f"`{command}` never said {expect!r}:\n{out}"
            return out
        time.sleep(0.5)


def mariadb(port: int, sql: str) -> str:
    res = subprocess.run(
        ["mariadb", "-h127.0.0.1", f"-P{port}", "-uroot", "--batch", "-e", sql],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


# -- Quick start ------------------------------------------------------------------------------


def test_quick_start_demo():
    assert shown("Quick start") == ["make demo", "make stop", "make test"]
    # From nothing, as after a clone: a demo left by an earlier run (its DNs added, its
    # replica loaded) would make the same commands mean something else.
    subprocess.run(["make", "stop"], cwd=ROOT, env=ENV, capture_output=True, timeout=120)
    for name in VAR_DIRS:
        shutil.rmtree(ROOT / "var" / name, ignore_errors=True)
    out = run("make demo", timeout=600)
    assert "\nall tables equal" in out, out[-3000:]


# -- Use it with --------------------------------------------------------------------------------


def test_a_new_replica_follows_the_dumper(tmp_path):
    (sql,) = shown("Use it with", "sql")
    RAN.add(sql)
    replica = throwaway_server(tmp_path, server_id=777)
    try:
        # As a user types it into the replica's `mariadb` client.
        res = subprocess.run(
            ["mariadb", "-h127.0.0.1", f"-P{replica.port}", "-uroot"],
            input=sql + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        report = run_check(load(DEMO_CONFIG), "127.0.0.1", replica.port)
        assert report.equal, report.render()
    finally:
        replica.stop()


def test_mariadb_binlog_decodes_copies_and_follows():
    decoded = run(one("Use it with", r"--to-last-log$"))
    assert "Write_rows" in decoded and "Xid = " in decoded, decoded[-2000:]

    for old in (ROOT / "var").glob("copy-binlog.*"):
        old.unlink()
    run(one("Use it with", r"--raw"))
    copy = ROOT / "var" / "copy-binlog.000001"
    served = ROOT / "var" / "demo" / "global-binlog" / "binlog.000001"
    assert copy.read_bytes()[:4] == b"\xfebin"
    assert copy.stat().st_size <= served.stat().st_size
    for old in (ROOT / "var").glob("copy-binlog.*"):
        old.unlink()

    follower = one("Use it with", r"--stop-never")
    follow(follower, ["bash", "-c", follower], "### INSERT INTO `bank`.`accounts`")


def test_python_mysql_replication():
    (code,) = shown("Use it with", "python")
    out = follow(code, [str(ROOT / ".venv" / "bin" / "python"), "-c", code], "Table: bank.accounts")
    assert "'balance'" in out, out[-2000:]  # column names, from the table maps


def test_any_client():
    out = run(one("Use it with", r"^mariadb -h"))
    assert "binlog.000001" in out and "CREATE TABLE" in out and "Format_desc" in out, out
    # The demo's user reads rows too (its [[dumper.users]] entry has `select`): no ERR 1142.
    out = run(one("Use it with", r"^mariadb-dump "))
    assert "INSERT INTO `accounts` VALUES" in out and "CHANGE MASTER TO" in out, out[-2000:]


# -- Commands -----------------------------------------------------------------------------------


def table(pattern: str) -> str:
    return one("Commands", pattern)


STATUS = r"cdc status --config \S+$"


def test_commands_pipeline_and_traffic():
    out = run(table(STATUS))
    assert "global TSO" in out and "consumers:" in out, out
    out = run(table(r"cdc status .*--json"))
    status = json.loads(out[out.index("{") : out.rindex("}") + 1])  # (run() adds stderr)
    assert status["last_tso"] > 0 and isinstance(status["consumers"], list), status
    assert "0 problem(s), 0 unreachable" in run(table(r"cdc preflight "))
    assert "TPS" in run(table(r"workload transfer"), timeout=120)
    assert "all tables equal" in run(table(r"cdc check "))
    for verify in (table(r"verify-binlog .*--server"), table(r"verify-binlog .*--from-files")):
        out = run(verify)
        assert "violation" not in out.lower() or "0 violation" in out.lower(), out
    assert re.search(
        r"^binlog\.000001:\d+ end=\d+ gtid=\S+:1(,\S+:2)? ", run(table(r"cdc locate "))
    )


def test_commands_scale_out_and_cn():
    assert "dn3" in run(table(r"cluster status"))
    assert "started dn4" in run(table(r"cluster add-dn"))
    assert "acknowledged" in run(table(r"cn add-dn"), timeout=180)
    assert "DDL record at TSO" in run(table(r"cn ddl"))
    assert re.search(r"done .* DDL on bank\.accounts", run(table(r"cn jobs")))
    run(table(r"cn flush-logs"))
    run(table(r"cn recover"))
    run(table(r"cn init"))
    # The moved partitions and the rotated DN binlogs reached a downstream intact.
    assert "all tables equal" in run(table(r"cdc check "))


def test_commands_stop_start_and_demo_again():
    assert "stopped" in run(table(r"cdc stop "))
    assert "started" in run(table(r"cdc start "))
    until(table(STATUS), "dn4")
    out = run(table(r"cdc demo "), timeout=600)
    assert "\nall tables equal" in out, out[-3000:]
    for verify in (table(r"verify-binlog .*--server"), table(r"verify-binlog .*--from-files")):
        run(verify)


def test_commands_bench():
    out = run(table(r"cdc bench writer"), timeout=300)
    assert "ratio" in out, out
    out = run(table(r"cdc bench fanout"), timeout=300)
    assert "ratio dumper/mariadbd at 4 clients" in out, out


def test_other_targets():
    for command in shown("Commands", "sh"):
        out = run(command, timeout=600)
        assert "failed:" not in out, out[-3000:]
        if command.startswith("make bench"):
            bench_quick.check(out)  # every benchmark's fields (tests/bench does not rerun them)


# -- Backfill -----------------------------------------------------------------------------------


def test_backfill_then_follow_from_the_snapshot():
    (command,) = shown("Backfill a new downstream")
    target = int(re.search(r"@127\.0\.0\.1:(\d+)", command).group(1))
    out = run(command, timeout=600)
    change_master = next(line for line in out.splitlines() if line.startswith("CHANGE MASTER"))
    mariadb(target, change_master + " START SLAVE;")
    report = run_check(load(DEMO_CONFIG), "127.0.0.1", target)
    assert report.equal, report.render()


# -- make stop ----------------------------------------------------------------------------------


def test_quick_start_stop_leaves_nothing_running():
    run("make stop", timeout=120)
    assert leftover_processes(ROOT / "var" / "demo") == []


# -- The local cluster and dumper HA (after the demo: the same ports) ----------------------------


def test_local_cluster():
    for command in shown("The local cluster"):
        run(command, timeout=120)
    assert leftover_processes(ROOT / "var" / "cluster") == []


def test_dumper_ha():
    up, init, start1, start2, follower, stop1, leader, reseed, stop2, down = shown("Dumper HA")
    try:
        run(up, timeout=120)
        run(init)
        run(start1)
        run(start2)
        until(follower, "follower")
        run(stop1)
        until(leader, "leader, term")
        assert "dumper 1: re-seeded from dumper 2" in run(reseed, timeout=120)
        run(stop2)
    finally:
        run(down)
    assert leftover_processes(ROOT / "var" / "ha") == []


# -- Measured figures: the recipes parse as printed -----------------------------------------------


def test_measured_figures_commands_parse():
    from cdc_cli.main import build_parser

    parser = build_parser()
    for command in shown("Measured figures"):
        argv = shlex.split(command)
        env = [a for a in argv if re.fullmatch(r"[A-Z_]+=\S*", a)]
        argv = argv[len(env) :]
        if argv[0] == "cdc":
            parser.parse_args(argv[1:])  # SystemExit on a wrong sub-command or option
        else:
            assert argv[0] == "pytest", command
            for path in [a for a in argv[1:] if not a.startswith("-")]:
                assert (ROOT / path).exists(), command
            for name in (e.split("=")[0] for e in env):
                assert subprocess.run(["grep", "-rq", name, str(ROOT / "tests")]).returncode == 0
        RAN.add(command)


def test_with_docker_commands_are_the_container_tests():
    """The "With Docker" commands need a Docker engine: tests/containers runs their work
    (`make test-containers`, from .ci/run: the images built, `docker compose up`, health-waited).
    Here: the target exists and the compose project is the top-level file they start."""
    for command in shown("With Docker"):
        if command == "make images":
            assert re.search(r"^images:", (ROOT / "Makefile").read_text(), re.M)
            assert "make test-containers" in (ROOT / ".ci" / "run").read_text()
        else:
            assert command == "docker compose up -d", command
            assert (ROOT / "docker-compose.yml").is_file()
        RAN.add(command)


# -- Last: nothing shown that no test ran ---------------------------------------------------------


def test_every_readme_command_was_run(request):
    module_tests = [i for i in request.session.items if i.module is request.module]
    if len(module_tests) < sum(n.startswith("test_") for n in dir(request.module)):
        pytest.skip("only a part of this module was selected")
    ci = (ROOT / ".ci" / "run").read_text()
    steps = [ci.index(s) for s in ("make demo", "make stop", "make test")]
    assert steps == sorted(steps), ".ci/run must run make demo, make stop, make test in order"
    RAN.add("make test")
    missing = sorted(SHOWN - RAN)
    assert not missing, "README commands no test ran:\n" + "\n".join(missing)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
