"""Dumper HA on a cluster of its own: two dumper processes, one leader (GMS lease), one
follower copying its files. Under transfer traffic the leader is SIGKILLed at random moments
(CDC_HA_KILLS, default 3) and restarted: the other one takes over, both copies end
byte-identical, and `cdc verify-binlog` / `cdc check` pass against the ground truth.

A MariaDB replica is attached to the LEADER (`CDC_HA_REPLICA=follower`: to the follower, as
before the leader served acknowledged data only): everything it received from a leader that
was then killed is, byte for byte, in the new leader's copy (`[dumper] serve_acknowledged_only`,
docs/dumper.md "The leader-consumer gap"), and it is re-pointed at the new leader at the
file:position it applied and continues without error.

A consumer in GTID mode (python-mysql-replication, `auto_position`) reads the leader all along:
each of its dumps asks for what its GTID set lacks, and after a kill it asks the new leader.
At the end it holds every transaction of the global binlog exactly once, in order: no gap,
no duplicate, the same GTIDs as the files."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pymysql
import pytest

from cdc.config import DumperPeer, load
from cdc_equipment.checks.downstream import run_check
from cdc_equipment.checks.verify_binlog import check, read_server
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster, throwaway_server
from tests.chaos.dumpers import Dumpers, copies_identical, end_run
from tests.chaos.transfer_setup import chaos_rng, transfer_cn
from tests.e2e.global_binlog import read_global_binlog

KILLS = int(os.environ.get("CDC_HA_KILLS", "3"))
REPLICA_ON = os.environ.get("CDC_HA_REPLICA", "leader")  # leader | follower
# CDC_HA_ACKS=0 turns serve_acknowledged_only off: shows the replica on the leader can break.
ACKS = os.environ.get("CDC_HA_ACKS", "1") != "0"
IDS = (1, 2)
ACK_WAIT_MS = 10_000  # a loaded machine must not make the leader give up waiting


@pytest.fixture
def ha_setup(tmp_path):
    cluster = throwaway_cluster(tmp_path / "cluster", dns=2)
    replica = throwaway_server(tmp_path, server_id=500)
    try:
        cfg = cluster.config()
        base = free_base_port(len(IDS))
        cfg.dumper.peers = [
            DumperPeer(i, port=base + i, binlog_dir=str(tmp_path / f"d{i}" / "binlog")) for i in IDS
        ]
        cfg.dumper.binlog_dir = str(tmp_path / "unused-binlog")
        cfg.cn.ground_truth_log = str(tmp_path / "truth.jsonl")
        cfg.pipeline.checkpoint_interval_ms = 200
        cfg.dumper.ack_wait_ms = ACK_WAIT_MS
        cfg.dumper.serve_acknowledged_only = ACKS
        config_path = str(tmp_path / "cdc.toml")
        cfg.dump(config_path)
        yield load(config_path), config_path, replica
    finally:
        replica.stop()
        cluster.down()


async def test_leader_kills_follower_takes_over_copies_identical(ha_setup, tmp_path):
    cfg, config_path, replica = ha_setup
    on_leader = REPLICA_ON == "leader"
    cn, workload = await transfer_cn(cfg)
    rng = chaos_rng("ha")
    dumpers = Dumpers(config_path, tmp_path)
    takeovers: list[float] = []
    load_task: asyncio.Task | None = None
    try:
        dumpers.start(1)
        await dumpers.wait(lambda: dumpers.role(1) == "leader", 60, "dumper 1 did not lead")
        dumpers.start(2)
        await dumpers.wait(
            lambda: (dumpers.binlog(2) / "binlog.index").exists(), 60, "dumper 2 copies nothing"
        )
        await asyncio.to_thread(attach_replica, replica, port_of(cfg, 1 if on_leader else 2))
        consumer = GtidConsumer(port_of(cfg, 1))
        consumer.start()
        # Traffic for as long as the kills take (takeovers slow down as the DN binlogs grow):
        # a leader is only seen to have taken over once it wrote something.
        stop_load = asyncio.Event()
        load_task = asyncio.create_task(
            run_workload(workload.step, threads=3, duration_s=KILLS * 60 + 60, stop=stop_load)
        )
        for _ in range(KILLS):
            await asyncio.sleep(rng.uniform(1.0, 4.0))
            leader = next(i for i in IDS if dumpers.role(i) == "leader")
            other = next(i for i in IDS if i != leader)
            await dumpers.wait(lambda o=other: dumpers.role(o) == "follower", 60, "no follower")
            if on_leader and ACKS:
                # The guarantee holds while the leader waits for acknowledgements (it gives up
                # only after ACK_WAIT_MS without one, e.g. while it has no follower yet).
                await dumpers.wait(
                    lambda n=leader: acknowledging(dumpers.status(n)), 60, "no acknowledgement"
                )
            dumpers.kill(leader)
            killed_at = time.monotonic()
            await dumpers.wait(
                lambda o=other: (
                    dumpers.role(o) == "leader" and dumpers.status(o).get("transactions", 0) > 0
                ),
                60,
                f"dumper {other} did not take over",
            )
            takeovers.append(time.monotonic() - killed_at)
            if on_leader:
                # Everything the replica got from the killed leader is in the new leader's
                # copy, the same bytes: re-point it there at the position it applied.
                received = await asyncio.to_thread(received_from_killed, replica)
                assert_prefix_of(dumpers.binlog(leader), dumpers.binlog(other), *received)
                consumer.port = port_of(cfg, other)  # its next dump goes to the new leader
                dumpers.start(leader)  # comes back as a follower
                await repoint_replica(replica, port_of(cfg, other), dumpers.binlog(other))
                continue
            consumer.port = port_of(cfg, other)
            dumpers.start(leader)  # comes back as a follower
            # The replica was on `other`, the leader now: move it, at the position it has
            # applied, to the new follower once that one's copy holds it.
            await dumpers.wait(lambda f=leader: dumpers.role(f) == "follower", 60, "no follower")
            await repoint_replica(replica, port_of(cfg, leader), dumpers.binlog(leader))
        stop_load.set()
        stats = await load_task

        # Let the leader catch up with the last commit, then the follower with the leader.
        last_tso = max(e["tso"] for e in read_ground_truth(cfg.cn.ground_truth_log))
        leader = await dumpers.wait(
            lambda: next(
                (
                    i
                    for i in IDS
                    if dumpers.role(i) == "leader"
                    and (dumpers.status(i).get("low_watermark_tso") or 0) >= last_tso
                ),
                None,
            ),
            60,
            "the leader did not catch up",
        )
        other = next(i for i in IDS if i != leader)
        await dumpers.wait(
            lambda: copies_identical(dumpers.binlog(leader), dumpers.binlog(other)),
            30,
            "the follower's copy differs from the leader's files",
        )
        expected = [
            (gtid, t.mark.decode())
            for t in read_global_binlog(dumpers.binlog(leader))
            for gtid in t.gtids
        ]
        consumer.port = port_of(cfg, leader)
        await dumpers.wait(
            lambda: len(consumer.got) >= len(expected), 60, "the GTID consumer did not catch up"
        )
        consumer.stop()
        assert consumer.got == expected, "the GTID consumer's transactions differ from the files"
        print(f"GTID consumer: {len(consumer.got)} GTIDs in {consumer.dumps} dumps")
        truth = read_ground_truth(cfg.cn.ground_truth_log)
        for i in IDS:  # every dumper serves the same, complete global binlog
            read = await asyncio.to_thread(
                read_server,
                "127.0.0.1",
                cfg.dumper.peers[i - 1].port,
                DEFAULT_USER,
                DEFAULT_PASSWORD,
            )
            report = check(read, truth)
            assert report.ok, report.render()
        result = await asyncio.to_thread(run_check, cfg, replica.host, replica.port, "root", "", 60)
        assert result.equal, result.render()
        assert stats.committed > 0
    finally:
        await end_run(dumpers, cn, load_task)
        print("takeover times (s):", ", ".join(f"{t:.1f}" for t in takeovers))


class GtidConsumer:
    """python-mysql-replication in GTID mode, in a thread: dump after dump (non-blocking, so
    that each one ends and the next asks for what the set lacks, from whichever dumper `port`
    names now), it keeps every (GTID, CTS mark) it got. A dump cut by a kill just ends."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.got: list[tuple[str, str]] = []  # (uuid:n, the CTS mark of its transaction)
        self.dumps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gtid-consumer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _gtid_set(self) -> str:
        if not self.got:  # another server's GTID: a valid set that lacks all of ours
            return "00000000-0000-0000-0000-000000000001:1"
        last = self.got[-1][0]
        uuid, gno = last.rsplit(":", 1)
        return f"{uuid}:1-{gno}"

    def _run(self) -> None:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import GtidEvent, RowsQueryLogEvent

        while not self._stop.is_set():
            self.dumps += 1
            pending: list[str] = []
            try:
                stream = BinLogStreamReader(
                    connection_settings={
                        "host": "127.0.0.1",
                        "port": self.port,
                        "user": DEFAULT_USER,
                        "password": DEFAULT_PASSWORD,
                    },
                    server_id=4400,
                    blocking=False,
                    auto_position=self._gtid_set(),
                    only_events=[GtidEvent, RowsQueryLogEvent],
                )
                try:
                    for ev in stream:
                        if isinstance(ev, GtidEvent):
                            pending.append(ev.gtid)
                        elif pending:  # the CTS mark: the transaction is whole
                            self.got += [(g, ev.query) for g in pending]
                            pending = []
                finally:
                    stream.close()
            except Exception:  # a dumper killed under it, or not up yet
                pass
            self._stop.wait(0.2)


def port_of(cfg, dumper_id: int) -> int:
    return cfg.dumper.peers[dumper_id - 1].port


def acknowledging(status: dict) -> bool:
    """The leader's status: a follower acknowledged lately and the leader waits for that."""
    ha = status.get("ha", {})
    acks = ha.get("acknowledged") or {}
    return not ha.get("ack_gate_degraded", True) and any(a["age_s"] < 2 for a in acks.values())


def received_from_killed(replica) -> tuple[str, int]:
    """Where the replica's IO thread stopped reading (the killed leader's file:position)."""
    with replica.connect() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("STOP SLAVE IO_THREAD")
        cur.execute("SHOW SLAVE STATUS")
        row = cur.fetchone()
        return row["Master_Log_File"], int(row["Read_Master_Log_Pos"])


def assert_prefix_of(old: Path, new: Path, file: str, pos: int) -> None:
    """`old`'s bytes of `file` up to `pos` (what a consumer got) are `new`'s too."""
    theirs = (new / file).read_bytes()[:pos] if (new / file).exists() else b""
    mine = (old / file).read_bytes()[:pos]
    assert len(theirs) == pos and _no_in_use(theirs) == _no_in_use(mine), (
        f"the new leader's copy of {file} differs from what the killed leader served before "
        f"{pos} (it holds {len(theirs)} bytes of it)"
    )


def _no_in_use(head: bytes) -> bytes:
    """The FDE's in-use flag (byte 4 + 17) differs between an active and a finished file."""
    data = bytearray(head)
    if len(data) > 21:
        data[21] &= ~1
    return bytes(data)


async def repoint_replica(replica, port: int, copy: Path) -> None:
    """STOP SLAVE, then CHANGE MASTER to `port` at the replica's applied file:position (the
    same coordinates on every dumper), once `copy` (that dumper's binlog dir) holds it."""

    def stop() -> tuple[str, int]:
        with replica.connect() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("STOP SLAVE")
            cur.execute("SHOW SLAVE STATUS")
            row = cur.fetchone()
            return row["Relay_Master_Log_File"], int(row["Exec_Master_Log_Pos"])

    file, pos = await asyncio.to_thread(stop)
    deadline = time.monotonic() + 60
    while not ((copy / file).exists() and (copy / file).stat().st_size >= pos):
        assert time.monotonic() < deadline, f"the follower's copy never reached {file}:{pos}"
        await asyncio.sleep(0.2)
    await asyncio.to_thread(attach_replica, replica, port, file, pos)


def attach_replica(replica, port: int, file: str = "binlog.000001", pos: int = 4) -> None:
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute(
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, "
            f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}', "
            f"MASTER_LOG_FILE='{file}', MASTER_LOG_POS={pos}, MASTER_USE_GTID=no, "
            "MASTER_HEARTBEAT_PERIOD=1, MASTER_CONNECT_RETRY=1"
        )
        cur.execute("START SLAVE")
