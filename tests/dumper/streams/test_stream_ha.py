"""HA followers of a multi-stream binlog (docs/streams.md, "HA followers"), without processes:
the configuration it needs, where a follower copies each stream from, how a follower
waits for the new term's start in every stream before it copies, the re-seed of every stream
copy (from dump servers over files, one per stream port) (tests/dumper/ha/fakes.py's
lease store; the real run is tests/e2e/test_streams_failover.py)."""

from __future__ import annotations

import pytest

from cdc.config import ConfigError, DumperConfig, DumperPeer
from cdc.streams import STREAM_PROGRESS_FILE, stream_dir
from cdc_equipment.local_cluster.testing import free_base_port
from dumper.ha import HaNode
from dumper.ha.copies import CopyTarget, read_state_term
from dumper.ha.election import one_end
from dumper.ha.reseed import STAGING, ReseedError, reseed
from tests.chaos.dumpers import copies_identical
from tests.dumper.ha.fakes import Cluster, FakeCopy, FakeGms, FakeLeaders, FakeLeaseStore
from tests.dumper.helpers import PASSWORD, USER, ServerThread
from tests.dumper.pipeline.fakes import config
from tests.dumper.test_retention import write_files
from topology import Lease, TermStart


def test_streams_with_peers_need_a_port_range_per_dumper():
    peers = [DumperPeer(1, port=3307), DumperPeer(2, port=3310)]
    assert DumperConfig(streams=2, peers=peers).streams == 2  # 3307-3309, 3310-3312
    with pytest.raises(ConfigError, match="overlap"):
        DumperConfig(streams=3, peers=peers)  # 3307-3310 meets 3310
    with pytest.raises(ConfigError, match="stream_port"):
        DumperConfig(streams=2, stream_port=4000, peers=peers)
    other_host = [DumperPeer(1, port=3307), DumperPeer(2, host="10.0.0.2", port=3307)]
    assert DumperConfig(streams=4, peers=other_host).streams == 4


def test_each_peer_has_a_metrics_port_per_stream(tmp_path):
    """Stream i's process serves metrics on its dumper's metrics port + 1 + i: a peer's
    default metrics port leaves room for the streams of the peers before it."""
    cfg = config(tmp_path / "binlog")
    cfg.dumper.streams, cfg.dumper.metrics_port = 2, 9100
    cfg.dumper.peers = [DumperPeer(1, port=3307), DumperPeer(2, port=3310)]
    ports = [cfg.for_dumper(i).dumper.metrics_port for i in (1, 2)]
    assert ports == [9100, 9103]  # streams on 9101-9102 and 9104-9105
    cfg.dumper.streams = 1
    assert [cfg.for_dumper(i).dumper.metrics_port for i in (1, 2)] == [9100, 9101]


def test_a_stream_copy_follows_the_leaders_stream_port(tmp_path):
    lease = Lease(1, "10.0.0.1:3307", 5, True)
    assert CopyTarget(None, tmp_path).leader_address(lease) == "10.0.0.1:3307"
    assert CopyTarget(0, tmp_path).leader_address(lease) == "10.0.0.1:3308"
    assert CopyTarget(2, tmp_path).leader_address(lease) == "10.0.0.1:3310"


async def test_a_follower_waits_for_the_terms_start_in_every_stream(tmp_path):
    cfg = config(tmp_path / "binlog")
    cfg.dumper.streams = 2
    cfg.dumper.id, cfg.dumper.port = 2, 3310
    gms = FakeGms()
    node = HaNode(cfg, FakeLeaseStore(gms, 2), FakeLeaders(cfg), copy=FakeCopy())
    assert [(c.stream, c.dir) for c in node.copies] == [
        (i, stream_dir(cfg.dumper, i)) for i in range(2)
    ]
    assert node.acks is None  # each leading stream process holds its own port's gate
    assert one_end(node.copy_ends()) == ("", 0)  # nothing copied yet

    # Term 3 began in stream 0 only: the follower does not copy yet (stream 1's process has
    # not recorded its start), then it does once both have.
    gms.terms.append(TermStart(3, 1, "binlog.000001", 4, stream=0))
    assert not await node.align_with_terms(3)
    gms.terms.append(TermStart(3, 1, "binlog.000001", 4))  # the single stream's: not ours
    assert not await node.align_with_terms(3)
    gms.terms.append(TermStart(3, 1, "binlog.000002", 4, stream=1))
    assert await node.align_with_terms(3)
    assert [read_state_term(c.dir) for c in node.copies] == [3, 3]


def stream_follower(tmp_path, leader_port: int):
    """Dumper 2 of a 2-stream group whose dumper 1 (the leader) listens on `leader_port`; its
    stream copies hold an older history (more files, other bytes) and a progress it saved when
    it led."""
    cfg = config(tmp_path / "unused")
    cfg.dumper.streams = 2
    cfg.dumper.peer_user, cfg.dumper.peer_password = USER, PASSWORD
    cfg.dumper.lease_ms = 700
    cfg.dumper.peers = [
        DumperPeer(1, port=leader_port, binlog_dir=str(tmp_path / "d1")),
        DumperPeer(2, port=leader_port + 3, binlog_dir=str(tmp_path / "d2")),
    ]
    cfg = cfg.for_dumper(2)
    for i in range(2):
        old = stream_dir(cfg.dumper, i)
        old.mkdir(parents=True)
        write_files(old, files=5, size=2048).close()
        (old / STREAM_PROGRESS_FILE).write_text("old")
    return cfg


async def test_reseed_replaces_every_stream_copy(tmp_path):
    """`cdc ha reseed` of a multi-stream follower: each stream's copy becomes the leader's
    stream files, byte for byte, copied from the leader's stream port (port + 1 + i; here a
    dump server per stream over files of its own), a prefix of the leader's term."""
    base = free_base_port(3)
    leader = [tmp_path / "leader" / f"stream{i}" for i in range(2)]
    for i, directory in enumerate(leader):
        directory.mkdir(parents=True)
        write_files(directory, files=2 + i, size=4096).close()
    cfg = stream_follower(tmp_path, base)
    gms = FakeGms()
    term = gms.hold(1, f"127.0.0.1:{base}", lease_ms=60_000)
    with ServerThread(leader[0], base + 1), ServerThread(leader[1], base + 2):
        done = await reseed(cfg, FakeLeaseStore(gms, 99))
    assert [c.stream for c in done.copies] == [0, 1]
    assert "stream 1: 3 file(s) binlog.000001..binlog.000003" in str(done)
    for i, directory in enumerate(leader):
        copy = stream_dir(cfg.dumper, i)
        assert done.copies[i].removed == [f"binlog.{n:06d}" for n in range(1, 6)]
        assert copies_identical(directory, copy)
        assert read_state_term(copy) == term
        assert not (copy / STREAM_PROGRESS_FILE).exists()
        assert not (copy / STAGING).exists()


async def test_reseed_of_streams_is_all_or_nothing(tmp_path):
    """Stream 1's port does not answer: no stream's copy is replaced, not even stream 0's,
    copied first (its staged copy is dropped)."""
    base = free_base_port(3)
    (tmp_path / "leader").mkdir()
    write_files(tmp_path / "leader").close()
    cfg = stream_follower(tmp_path, base)
    before = [sorted(p.name for p in stream_dir(cfg.dumper, i).iterdir()) for i in range(2)]
    gms = FakeGms()
    gms.hold(1, f"127.0.0.1:{base}", lease_ms=60_000)
    with ServerThread(tmp_path / "leader", base + 1), pytest.raises(ReseedError, match="stream 1"):
        await reseed(cfg, FakeLeaseStore(gms, 99))
    assert [sorted(p.name for p in stream_dir(cfg.dumper, i).iterdir()) for i in range(2)] == before


def test_status_shows_each_stream_copy_and_each_streams_gate():
    from cdc_cli.commands.pipeline import _ha_line, _stream_lines

    follower = {
        "dumper_id": 2,
        "address": "h:3310",
        "role": "follower",
        "term": 3,
        "leader": "h:3307",
        "copies": [
            {"stream": 0, "file": "binlog.000002", "position": 900},
            {"stream": 1, "file": "", "position": 0},
        ],
    }
    line = _ha_line(follower)
    assert "stream 0 at binlog.000002:900, stream 1 at -:0" in line
    leading = {"stream": 1, "port": 3309, "ha": {"ack_gate_degraded": True}}
    assert _stream_lines([leading])[1].endswith("acks DEGRADED")
    # Its served bound, once recorded in the GMS (docs/dumper.md, "A degraded gate's bound").
    leading["ha"]["served_bound"] = {"file": "binlog.000001", "position": 900, "records": 2}
    assert _stream_lines([leading])[1].endswith("acks DEGRADED up to binlog.000001:900")


class FakeCopyServers:
    """Records when a node starts and stops serving its stream copies, with its role then."""

    def __init__(self, node: HaNode | None = None) -> None:
        self.node = node
        self.log: list[tuple[str, str]] = []

    def start(self) -> None:
        self.log.append(("start", self.node.role))

    async def stop(self) -> None:
        self.log.append(("stop", self.node.role))


async def test_copies_are_served_while_following_and_never_while_leading(tmp_path):
    async with Cluster(tmp_path) as c:
        servers = {i: FakeCopyServers() for i in (1, 2)}
        nodes = {i: c.node(i, start=False, copy_servers=servers[i]) for i in (1, 2)}
        for i, n in nodes.items():
            servers[i].node = n.ha
        c.start(nodes[1])
        await c.until(lambda: nodes[1].ha.role == "leader")
        c.start(nodes[2])
        await c.until(lambda: nodes[2].copy.leases)
        b = servers[2]
        assert b.log[-1] == ("start", "follower")
        nodes[1].store.cut()  # the leader is gone: 2 takes over, its copy servers stop first
        await c.until(lambda: nodes[2].ha.role == "leader")
        assert b.log[-1][0] == "stop"  # before it became the leader
        for s in servers.values():  # (a loaded machine may fence a leader: it follows again)
            assert all(role != "leader" for _, role in s.log)
        assert servers[1].log[0][0] == "stop"
