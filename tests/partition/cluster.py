"""A cluster whose every process runs on a host of its own (cdc_equipment/local_cluster/hosts.py), for the
partition tests: hosts `gms`, `dn1`, `dn2` (MariaDB servers bound to their host's address),
`d1`, `d2` (two HA dumpers, `cdc start --dumper-id N`, serving acknowledged data only), `cn`
(the CN workloads), `c1`, `c2` (consumers: `mariadb-binlog --raw --stop-never`) and `replica`
(a MariaDB replica of the leader). The test process (host "local") reaches every one.

It is tests/chaos/harness.py's `Chaos` (the workloads, `cdc cn recover`, the end-of-run proof:
settle, catch up, `cdc verify-binlog`, `cdc check`) with the nodes placed on hosts and the
pipeline being the two dumpers (tests/chaos/dumpers.py); the leader is whichever says so.

CDC_PARTITION_LEASE_MS (default 5000, the product's: a 3000 ms lease fenced a healthy leader
on a loaded machine, a GMS renewal taking over its 1 s of slack) is the dumpers' lease, CDC_PARTITION_ACK_WAIT_MS
(default 10000: a loaded machine must not make the leader give up waiting) their ack wait; a
test may choose its own (`ack_wait_ms`: the follower-cut test wants the gate to give up).

`ids=(1,)` runs one dumper (on host `d1`, a single peer: it leads alone and serves all it
writes, no acknowledgements): the tests of a DN link, a CN link or a consumer link need no
follower. `tune(cfg)` changes the written config last (a test's own timeouts, retention)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pymysql

from cdc.config import DumperPeer
from cdc_equipment.local_cluster.hosts import Host, Hosts
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER, LocalCluster
from cdc_equipment.local_cluster.testing import free_base_port
from tests.chaos.dumpers import Dumpers, copies_identical
from tests.chaos.harness import Chaos

HOSTS = ("gms", "dn1", "dn2", "d1", "d2", "cn", "c1", "c2", "replica")
IDS = (1, 2)
DUMPER_PORT = 3307  # (each dumper on its own host's address)
LEASE_MS = int(os.environ.get("CDC_PARTITION_LEASE_MS", "5000"))
ACK_WAIT_MS = int(os.environ.get("CDC_PARTITION_ACK_WAIT_MS", "10000"))
# A lone dumper's lease is not under test: long enough that a loaded machine (seen: load 12
# on 2 cores, a GMS answer slower than what a 3 s lease leaves after a takeover: 14 takeovers
# in 90 s) does not make it step down and take over again, which resets its status's counts.
SOLO_LEASE_MS = 10000


class PartitionCluster(Chaos):
    """See the module's docstring; `close()` stops everything it started (the hosts are the
    caller's: `Hosts.close()` after it)."""

    def __init__(
        self,
        directory: Path,
        hosts: Hosts,
        *,
        lease_ms: int = LEASE_MS,
        ack_wait_ms: int = ACK_WAIT_MS,
        ids: tuple[int, ...] = IDS,
        tune: Callable[[object], None] | None = None,
    ):
        self.hosts, self.lease_ms, self.ack_wait_ms = hosts, lease_ms, ack_wait_ms
        self.ids, self.tune = ids, tune
        self.dumpers: Dumpers | None = None
        self.consumers: dict[str, Consumer] = {}
        for name in HOSTS:
            hosts.add(name)
        cluster = LocalCluster(directory / "cluster")
        try:
            cluster.up(
                dns=2,
                base_port=free_base_port(3),
                hosts={n: hosts[n] for n in ("gms", "dn1", "dn2")},
            )
        except BaseException:
            cluster.down()
            raise
        super().__init__(
            directory, cluster=cluster, replica_host=hosts["replica"], cn_host=hosts["cn"]
        )
        self.dumpers = Dumpers(self.config_path, directory, {i: hosts[f"d{i}"] for i in ids})

    def configure(self, cfg) -> None:
        d = cfg.dumper
        d.peers = [
            DumperPeer(
                i,
                host=self.hosts[f"d{i}"].address,
                port=DUMPER_PORT,
                binlog_dir=str(self.dir / f"d{i}" / "binlog"),
            )
            for i in self.ids
        ]
        d.binlog_dir = str(self.dir / "unused-binlog")
        d.lease_ms = self.lease_ms
        d.lease_renew_ms = min(d.lease_renew_ms, self.lease_ms // 3)
        d.serve_acknowledged_only = True
        d.ack_wait_ms = self.ack_wait_ms
        if self.tune is not None:
            self.tune(cfg)

    # -- the dumpers -------------------------------------------------------------------------
    def start_pipeline(self) -> None:
        """Dumper 1, until it leads; then dumper 2 (if any), until it follows and copies."""
        self.dumpers.start(1)
        self._until(lambda: self.dumpers.role(1) == "leader", 60, "dumper 1 did not lead")
        if 2 not in self.ids:
            return
        self.dumpers.start(2)
        self._until(lambda: self.dumpers.role(2) == "follower", 60, "dumper 2 did not follow")
        index = self.dumpers.binlog(2) / "binlog.index"
        self._until(index.exists, 60, "dumper 2 copies nothing")

    def _until(self, what, timeout: float, message: str):
        deadline = time.monotonic() + timeout
        while not (result := what()):
            self.assert_pipeline_alive()
            assert time.monotonic() < deadline, f"{message}: {self.dumpers.tail()}"
            time.sleep(0.1)
        return result

    def leader(self) -> int | None:
        """The dumper whose fresh status says it leads (the newer term if two do)."""
        leading = [(self.dumpers.status(i).get("ha", {}).get("term", 0), i) for i in self.ids]
        leading = [(t, i) for t, i in leading if self.dumpers.role(i) == "leader"]
        return max(leading)[1] if leading else None

    def assert_pipeline_alive(self) -> None:
        for i, p in self.dumpers.procs.items():
            assert p.poll() is None, f"dumper {i} exited ({p.returncode}): {self.dumpers.tail()}"

    def pipeline_dir(self, i: int) -> Path:
        return self.dir / f"d{i}" / f"pipeline-{i}"

    @property
    def state_dir(self) -> Path:
        """The leader's (Chaos.wait_caught_up reads its status)."""
        leader = self._until(self.leader, 60, "no dumper leads")
        return self.pipeline_dir(leader)

    def dumper_address(self, i: int | None = None) -> tuple[str, int]:
        """Dumper `i`'s address, by default the leader's."""
        i = i or self._until(self.leader, 60, "no dumper leads")
        return self.hosts[f"d{i}"].address, DUMPER_PORT

    def verify_args(self) -> list[str]:
        host, port = self.dumper_address()
        return ["--server", f"{host}:{port}"]

    # -- the replica -------------------------------------------------------------------------
    def repoint_replica(self, to: int, timeout: float = 60) -> tuple[str, int]:
        """STOP SLAVE, then CHANGE MASTER to dumper `to` at the file:position the replica
        applied, once `to`'s copy holds it (the same coordinates on every dumper)."""
        with self.replica.connect() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("STOP SLAVE")
            cur.execute("SHOW SLAVE STATUS")
            row = cur.fetchone()
        file, pos = row["Relay_Master_Log_File"], int(row["Exec_Master_Log_Pos"])
        copy = self.dumpers.binlog(to) / file
        self._until(
            lambda: copy.exists() and copy.stat().st_size >= pos,
            timeout,
            f"dumper {to}'s copy never reached {file}:{pos}",
        )
        host, port = self.dumper_address(to)
        with self.replica.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"CHANGE MASTER TO MASTER_HOST='{host}', MASTER_PORT={port}, "
                f"MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}"
            )
            cur.execute("START SLAVE")
        return file, pos

    async def after_the_run(
        self, leader: int, consumers: dict[str, Consumer], follower: int | None = None
    ) -> list[str]:
        """What every partition test checks once its proof passed: the replica ended without
        an error; each consumer reads to the end of dumper `leader`'s binlog within 30 s and
        holds a prefix of it, byte for byte (then it is stopped); the follower's copy is the
        leader's. Returns the problems found."""
        problems = []
        if self.replica is not None and (error := self.replica_error()):
            problems.append(f"the replica: {error}")
        binlog = self.dumpers.binlog(leader)
        total = sum(p.stat().st_size for p in binlog.glob("binlog.[0-9]*"))
        for name, consumer in consumers.items():
            try:
                await wait(lambda consumer=consumer: consumer.size() >= total, 30, "")
            except AssertionError:
                problems.append(
                    f"consumer {name} holds {consumer.size()} of the binlog's {total} bytes "
                    f"30 s after the run: {consumer.log()}"
                )
            consumer.stop()
            if why := not_a_prefix(consumer.dir, binlog):
                problems.append(f"consumer {name}: {why}")
        if follower is not None:
            try:
                await wait(lambda: copies_identical(binlog, self.dumpers.binlog(follower)), 30, "")
            except AssertionError:
                problems.append(
                    f"dumper {follower}'s copy differs from the leader's 30 s after the run"
                )
        return problems

    def replica_error(self) -> str:
        """The replica's IO/SQL errors now ("" if none)."""
        with self.replica.connect() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW SLAVE STATUS")
            row = cur.fetchone() or {}
        return "; ".join(
            f"{k}: {row[k]}" for k in ("Last_IO_Error", "Last_SQL_Error") if row.get(k)
        )

    # -- consumers ---------------------------------------------------------------------------
    def consume(
        self, host: str, dumper: int, file: str = "binlog.000001", position: int = 4, name=""
    ) -> Consumer:
        """A consumer on `host` reading dumper `dumper` from `file`:`position` (by default its
        first byte), into `consumer-<name or host>`."""
        address, port = self.dumper_address(dumper)
        name = name or host
        consumer = Consumer(self.hosts, self.hosts[host], self.dir / f"consumer-{name}")
        consumer.start(address, port, file, position)
        self.consumers[name] = consumer
        return consumer

    # -- the end -----------------------------------------------------------------------------
    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.stop()
        if self.dumpers is not None:
            self.dumpers.stop()
        super().close()


class Consumer:
    """`mariadb-binlog --read-from-remote-server --raw --stop-never` on a host: its copy of
    the global binlog as it was served, in `dir` (the files' names, their bytes)."""

    def __init__(self, hosts: Hosts, host: Host, directory: Path) -> None:
        self.hosts, self.host, self.dir = hosts, host, directory
        self.proc: subprocess.Popen | None = None

    def start(
        self, address: str, port: int, file: str = "binlog.000001", position: int = 4
    ) -> None:
        """From `file`:`position` (a resumed copy's first file then starts with the magic and
        the FDE the server resends, then the events from `position`)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir.parent / f"{self.dir.name}.log", "ab") as log:
            self.proc = self.hosts.popen(
                self.host,
                ["mariadb-binlog", "--read-from-remote-server", f"--host={address}"]
                + [f"--port={port}", f"--user={DEFAULT_USER}", f"--password={DEFAULT_PASSWORD}"]
                + ["--raw", "--stop-never", f"--result-file={self.dir}/"]
                + [f"--start-position={position}", file],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.dir.glob("binlog.[0-9]*"))

    def log(self) -> str:
        try:
            return (self.dir.parent / f"{self.dir.name}.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""


def not_a_prefix(consumer: Path, binlog: Path) -> str:
    """Why the files in `consumer` are not a prefix of the binlog in `binlog` ("" if they
    are): every file but its last equal to that file, its last a prefix of it (the FDE's
    in-use flag aside: it differs between a file being written and a finished one)."""
    names = sorted(p.name for p in consumer.glob("binlog.[0-9]*"))
    for n, name in enumerate(names):
        mine = _no_in_use((consumer / name).read_bytes())
        theirs_path = binlog / name
        if not theirs_path.exists():
            return f"{name}: {len(mine)} bytes served, the final leader has no such file"
        theirs = _no_in_use(theirs_path.read_bytes())
        last = n == len(names) - 1
        if (theirs[: len(mine)] if last else theirs) != mine:
            at = next(
                (i for i, (x, y) in enumerate(zip(mine, theirs, strict=False)) if x != y),
                min(len(mine), len(theirs)),
            )
            return (
                f"{name}: the consumer's {len(mine)} bytes differ from the final leader's "
                f"{len(theirs)} at byte {at}: a fork"
            )
    return ""


def _no_in_use(head: bytes) -> bytes:
    """The FDE's in-use flag (byte 4 + 17) cleared."""
    data = bytearray(head)
    if len(data) > 21:
        data[21] &= ~1
    return bytes(data)


async def wait(what, timeout: float, message: str):
    """Until `what()` is true (returns it), at most `timeout` seconds (then fails: `message`)."""
    deadline = time.monotonic() + timeout
    while not (result := what()):
        assert time.monotonic() < deadline, message
        await asyncio.sleep(0.1)
    return result
