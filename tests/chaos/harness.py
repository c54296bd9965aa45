"""What the chaos tests share: a throw-away cluster with the pipeline (`cdc start`), CN workloads
(`cdc workload transfer|orders`) and a MariaDB replica of the dumper, all as separate processes;
then the end-of-run proof: every in-doubt branch settled, the pipeline caught up with the CN's
ground truth, `cdc verify-binlog` and `cdc check` pass.

Kill counts come from CDC_CHAOS_KILLS (per kind, default 5), the random timing from
CDC_CHAOS_SEED (printed, to replay a run)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cdc.config import load
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster, throwaway_server

KILLS = int(os.environ.get("CDC_CHAOS_KILLS", "5"))
ROOT = Path(__file__).parents[2]
ACCOUNTS = 100  # the transfer table every workload process shares
# Small "large" orders transactions: the chaos is about kills, not size (spill has its tests).
WORKLOADS = {
    "transfer": ["--threads", "3", "--accounts", str(ACCOUNTS), "--heartbeat"],
    "orders": ["--threads", "2", "--large-rows", "300", "--large-every", "100"],
}


def cdc(*args: str) -> list[str]:
    return [sys.executable, "-m", "cdc_cli.main", *args]


def in_doubt(cluster) -> dict:
    out = {}
    for dn in cluster.dns:
        try:
            with dn.connect() as conn, conn.cursor() as cur:
                cur.execute("XA RECOVER")
                out[dn.name] = cur.fetchall()
        except Exception as exc:  # noqa: BLE001 - a diagnostic only
            out[dn.name] = repr(exc)
    return out


class Chaos:
    """One cluster + pipeline + replica for a chaos run; `close()` tears everything down.

    `cluster`: a started one to use (tests/partition: its nodes on hosts of their own) instead
    of a throw-away one of 3 DNs; `replica_host`, `cn_host`: the hosts (cdc_equipment/local_cluster/hosts.py)
    the replica and the CN processes (workloads) run on, None: here."""

    def __init__(
        self,
        directory: Path,
        *,
        replica: bool = True,
        spare_dns: int = 4,
        cluster=None,
        replica_host=None,
        cn_host=None,
    ):
        self.dir = directory
        self.cluster = cluster or throwaway_cluster(
            directory / "cluster", dns=3, spare_dns=spare_dns
        )
        self.cn_host = cn_host
        self.procs: dict[str, subprocess.Popen] = {}
        self.replica = None
        self.kills: Counter[str] = Counter()
        self.settled: Counter[str] = Counter()  # by `cdc cn recover` runs: committed/rolled back
        seed = int(os.environ.get("CDC_CHAOS_SEED", time.time()))
        print(f"chaos seed {seed} (CDC_CHAOS_SEED to replay the timing)")
        self.rng = random.Random(seed)
        try:
            self.config_path = str(directory / "cdc.toml")
            self.dumper_port = free_base_port(0)
            self._write_config()
            self.run_cdc("cn", "init")
            if replica:
                self.replica = throwaway_server(directory, server_id=600, host=replica_host)
        except BaseException:
            self.close()
            raise
        self.log = open(directory / "processes.log", "ab")  # noqa: SIM115 - closed in close()

    def _write_config(self) -> None:
        """The cluster's config (with every DN it runs) plus this run's pipeline settings."""
        cfg = self.cluster.config()
        cfg.dumper.port = self.dumper_port
        cfg.dumper.binlog_dir = str(self.dir / "binlog")
        cfg.cn.ground_truth_log = str(self.dir / "truth.jsonl")
        cfg.pipeline.checkpoint_interval_ms = 200
        # A paused DN is noticed (and its dump reconnected) within 2 s, as in tests/e2e.
        cfg.pipeline.dn_idle_timeout_ms = 2000
        self.configure(cfg)
        cfg.dump(self.config_path)
        self.cfg = load(self.config_path)

    def configure(self, cfg) -> None:
        """A subclass's own settings (e.g. tests/chaos/test_streams.py's streams)."""

    def add_dn(self) -> int:
        """Start one more DN (`cdc cluster add-dn`'s step) and write it into the config; the
        processes already running learn it from the GMS once `cdc cn add-dn` adds it."""
        spec = self.cluster.add_dn()
        self._write_config()
        return spec.dn_id

    # -- processes -------------------------------------------------------------------------------
    def cdc_result(
        self, *args: str, timeout: float = 120, env: dict | None = None
    ) -> subprocess.CompletedProcess:
        """`cdc ARGS --config` of this cluster, its exit code and output, unchecked."""
        return subprocess.run(
            cdc(*args, "--config", self.config_path),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )

    def run_cdc(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        res = self.cdc_result(*args, timeout=timeout)
        if check:
            assert res.returncode == 0, f"cdc {' '.join(args)}: {res.stdout}{res.stderr}"
        if args[:2] == ("cn", "recover"):
            m = re.search(r"committed (\d+), rolled back (\d+)", res.stdout)
            if m:
                self.settled["committed"] += int(m[1])
                self.settled["rolled back"] += int(m[2])
        return res.stdout

    def spawn(
        self, name: str, args: list[str], env: dict | None = None, out=None, host=None
    ) -> subprocess.Popen:
        """`cdc ARGS` as process `name` (on `host`, a cdc_equipment.local_cluster.hosts.Host, when given);
        its output goes to processes.log, or to `out`."""
        self.log.write(f"--- {time.strftime('%T')} {name}: {' '.join(args)}\n".encode())
        self.log.flush()
        argv = cdc(*args, "--config", self.config_path)
        proc = subprocess.Popen(
            host.argv(argv) if host is not None else argv,
            stdout=out or self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )
        self.procs[name] = proc
        return proc

    def start_pipeline(self) -> None:
        # A status file from before a kill is not this process's (it writes one once it serves).
        (self.state_dir / "status.json").unlink(missing_ok=True)
        self.spawn("pipeline", ["start"])
        deadline = time.monotonic() + 60
        while not (self.state_dir / "status.json").exists():
            self.assert_pipeline_alive()
            assert time.monotonic() < deadline, "the pipeline wrote no status within 60 s"
            time.sleep(0.2)

    def start_workload(
        self, name: str, env: dict | None = None, duration: float = 3600
    ) -> subprocess.Popen:
        """Workload `name` for `duration` seconds (then it prints what it committed and what
        failed, by error, to processes.log; steps under way finish)."""
        args = ["workload", name, "--duration", f"{duration:g}", *WORKLOADS[name]]
        return self.spawn(name, args, env, host=self.cn_host)

    def truth_size(self) -> int:
        """The ground-truth log's length now: `wait_load_writes`'s starting point."""
        try:
            return Path(self.cfg.cn.ground_truth_log).stat().st_size
        except FileNotFoundError:
            return 0

    async def wait_load_writes(
        self, since: int, timeout: float = 60, workloads: int = len(WORKLOADS)
    ) -> None:
        """Until every one of WORKLOADS (or the first `workloads` started) commits (a CN instance of its own in the ground truth
        after byte `since`): a workload process ends if a DN dies while it sets up, and a
        chaos run would then go on without that load (seen: a DN-kill run that committed
        one transaction in all)."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.cfg.cn.ground_truth_log, "rb") as f:
                f.seek(since)
                lines = f.read().decode().splitlines()
            entries = [json.loads(line) for line in lines[:-1]]  # (the last may be partial)
            # (a recovered commit is logged under the txn_id of the process that began it)
            writers = {
                e["txn_id"] >> 32 for e in entries if e["kind"] == "txn" and not e["recovered"]
            }
            if len(writers) >= workloads:
                return
            assert time.monotonic() < deadline, (
                f"the load did not start: {len(writers)} of {workloads} workloads "
                f"commit\n{self.log_tail()}"
            )
            await asyncio.sleep(0.2)

    async def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        await asyncio.to_thread(proc.wait)

    def assert_pipeline_alive(self) -> None:
        proc = self.procs["pipeline"]
        assert proc.poll() is None, f"the pipeline exited ({proc.returncode}):\n{self.log_tail()}"

    def servers_down(self) -> str:
        """The cluster's servers that are not running, each with the end of its error log: when
        the load stalls, whether a DN or the GMS died (and why) when no test stopped it."""
        down = [s for s in self.cluster.servers() if not s.is_running()]
        return (
            "\n".join(
                f"{s.name} (port {s.port}) is not running; {s.error_log} ends:\n{s.log_tail(30)}"
                for s in down
            )
            or "every server of the cluster runs"
        )

    def log_tail(self, n: int = 4000) -> str:
        return (self.dir / "processes.log").read_bytes()[-n:].decode(errors="replace")

    @property
    def state_dir(self) -> Path:
        return Path(self.cfg.dumper.binlog_dir).parent / "pipeline"

    # -- the replica -----------------------------------------------------------------------------
    def dumper_address(self) -> tuple[str, int]:
        """Where the global binlog is served (the replica's master, what verify-binlog reads)."""
        return "127.0.0.1", self.cfg.dumper.port

    def verify_args(self) -> list[str]:
        """`cdc verify-binlog`'s source: by default the configured dumper (each stream's)."""
        return []

    def attach_replica(self) -> None:
        host, port = self.dumper_address()
        with self.replica.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"CHANGE MASTER TO MASTER_HOST='{host}', MASTER_PORT={port}, "
                f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}', "
                "MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, MASTER_USE_GTID=no, "
                "MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1"
            )
            cur.execute("START SLAVE")

    # -- the end-of-run proof --------------------------------------------------------------------
    async def stop_workloads(self) -> None:
        for name in list(self.procs):
            if name != "pipeline":
                await self.kill(name)  # at a random moment too: recovery settles it

    def recover(self) -> str:
        """`cdc cn recover` until nothing is left in doubt (a DN just restarted may still be
        finishing its own crash recovery)."""
        deadline = time.monotonic() + 60
        while True:
            out = self.run_cdc("cn", "recover", "--wait", "10", check=False)
            if "left in doubt" not in out and out.startswith("recovery:"):
                return out.strip()
            assert time.monotonic() < deadline, f"still in doubt: {out}; {in_doubt(self.cluster)}"
            time.sleep(1)

    async def wait_caught_up(self, timeout: float = 120) -> None:
        """Until the pipeline's low watermark passes the last commit of the ground truth."""
        last_tso = max(e["tso"] for e in read_ground_truth(self.cfg.cn.ground_truth_log))
        status_file = self.state_dir / "status.json"
        deadline = time.monotonic() + timeout
        while True:
            self.assert_pipeline_alive()
            try:
                status = json.loads(status_file.read_text())
            except (OSError, ValueError):
                status = {}
            low = status.get("low_watermark_tso") or 0
            if low >= last_tso and status["written_at"] > time.time() - 2:
                return
            assert time.monotonic() < deadline, (
                f"pipeline did not catch up: {status}; {in_doubt(self.cluster)}"
            )
            await asyncio.sleep(0.5)

    async def prove(self, what: str) -> str:
        """Settle, catch up, `cdc verify-binlog` and `cdc check`; returns a summary line."""
        await self.stop_workloads()
        recovered = await asyncio.to_thread(self.recover)
        await self.wait_caught_up()
        res = await asyncio.to_thread(
            self.cdc_result, "verify-binlog", *self.verify_args(), timeout=300
        )
        assert res.returncode == 0, f"verify-binlog after {what}:\n{res.stdout}{res.stderr}"
        checked = "no replica"
        if self.replica is not None:
            from cdc_equipment.checks.downstream import run_check

            report = await asyncio.to_thread(
                run_check, self.cfg, self.replica.host, self.replica.port, "root", "", 120
            )
            assert report.equal, f"cdc check after {what}:\n{report.render()}"
            checked = f"cdc check equal ({len(report.tables)} tables)"
        lines = res.stdout.splitlines()
        verified = next(line for line in lines if "exactly once" in line)
        # (a multi-stream binlog has one schema line per stream: "stream 0: rows match …")
        schema = [line for line in lines if "rows match the DDL history" in line]
        schemas = "; ".join(" ".join(line.split()) for line in schema)
        return f"{recovered}; {' '.join(verified.split())}; {schemas}; {checked}"

    def close(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM if name == "pipeline" else signal.SIGKILL)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()
        if self.replica is not None:
            self.replica.stop()
        self.cluster.down()


@contextmanager
def running_chaos(directory: Path, **kwargs) -> Iterator[Chaos]:
    """A `Chaos` with its pipeline running and a replica attached (a test module's cluster);
    closed after, whatever happened."""
    c = Chaos(directory, **kwargs)
    try:
        c.start_pipeline()
        c.attach_replica()
        yield c
    finally:
        c.close()
