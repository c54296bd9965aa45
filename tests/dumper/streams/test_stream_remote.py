"""A stream on another host (docs/streams.md, "A stream on another host"): stream 1's listener
(`cdc stream serve --stream 1`) runs in a network namespace of its own, reached over a veth
pair as a separate host; the merge's `StreamSet` (here, in the root namespace) starts stream 0
itself and links to stream 1 over TCP. Stream 1 is fed, synced and served on its own address;
its process is SIGKILLed (its listener starts another for the merge's next link) and then its
listener is (the merge waits, paused, until it is started again by hand); each time stream 1
resumes from its own end, and in the end its MySQL port serves every transaction once, in
order, with gapless GTIDs. Needs root and `ip` (skipped otherwise)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.config import load
from cdc.pauses import STREAM_UNREACHABLE, Pauses
from cdc.streams import stream_port, stream_server_uuid
from cdc_equipment.checks.verify_binlog import read_server
from dumper.pipeline.txn_encoder import TransactionEncoder
from dumper.streams.stream_set import StreamDied, StreamSet
from tests.dumper.streams.test_stream_disk_full import until
from tests.dumper.streams.test_stream_process import CLUSTER_UUID, batch, config
from tests.dumper.test_txn_encoder import transactions  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[3]
SECRET = "a test secret of the stream link"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="network namespaces need root and iproute2's `ip`",
)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def host2():
    """A network namespace with its own veth end and address: another host, as the merge
    sees it. Yields (namespace, the merge's address there, the host's address)."""
    n = os.getpid() % 10000
    ns, ours, theirs = f"cdcs{n}", f"cdcs{n}a", f"cdcs{n}b"
    net = f"10.231.{n % 250}"
    ip("netns", "add", ns)
    try:
        ip("link", "add", ours, "type", "veth", "peer", "name", theirs)
        ip("link", "set", theirs, "netns", ns)
        ip("addr", "add", f"{net}.1/30", "dev", ours)
        ip("link", "set", ours, "up")
        ip("-n", ns, "addr", "add", f"{net}.2/30", "dev", theirs)
        ip("-n", ns, "link", "set", theirs, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        yield ns, f"{net}.1", f"{net}.2"
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)  # (the veth pair goes with it)
        subprocess.run(["ip", "link", "del", ours], check=False, capture_output=True)


def serve(ns: str, config_path: Path) -> subprocess.Popen:
    """`cdc stream serve --stream 1` on host2 (`ip netns exec` execs it: the pid is its)."""
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "cdc_cli.main"]
        + ["stream", "serve", "--config", str(config_path), "--stream", "1"],
        cwd=ROOT,
    )


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(30)


async def test_a_stream_in_a_namespace_of_its_own(tmp_path, host2, transactions):  # noqa: F811
    ns, _, address = host2
    cfg = config(tmp_path)
    link_port = 7000  # (host2's ports are its own)
    cfg.dumper.stream_addresses = {"1": f"{address}:{link_port}"}
    cfg.dumper.stream_secret = SECRET
    # host2's cdc.toml: the same, with its own binlog directory and its server on its address
    remote = load_dumped(cfg, tmp_path / "host2" / "cdc.toml")
    remote.dumper.host = address
    remote.dumper.binlog_dir = str(tmp_path / "host2" / "binlog")
    remote.dump(tmp_path / "host2" / "cdc.toml")
    pauses = Pauses()
    state = tmp_path / "state"
    streams = StreamSet(cfg, CLUSTER_UUID, state, pauses)
    encoder = [TransactionEncoder(cfg.dumper.server_id, gtids=True) for _ in range(2)]
    txns = transactions[:5]
    listener = serve(ns, tmp_path / "host2" / "cdc.toml")
    try:
        assert await asyncio.wait_for(streams.start(), 60) == [None, None]
        streams.send(0, batch(encoder[0], txns[:2], txns[2].key))
        streams.send(1, batch(encoder[1], txns[2:3], txns[2].key))
        await streams.drain()
        await streams.sync()
        # its status travels over the link to where a local stream's is
        status_file = state / "stream1" / "status.json"
        await until(lambda: _status(status_file).get("gno") == 1, "stream 1's status")
        victim = _status(status_file)["pid"]

        # its process dies: the merge links again, the listener starts another one
        os.kill(victim, signal.SIGKILL)
        await until(lambda: not streams.processes[1].alive, "the link's end")
        with pytest.raises(StreamDied):
            streams.check()
        ends = await asyncio.wait_for(streams.start(), 60)
        assert ends == [txns[2].key, txns[2].key]  # (stream 0: its progress)
        streams.send(1, batch(encoder[1], txns[3:4], txns[3].key))
        await streams.drain()
        await streams.sync()

        # its listener dies (its process with it): the merge waits, paused, until it is back
        stop(listener, signal.SIGKILL)
        await until(lambda: not streams.processes[1].alive, "the link's end")
        starting = asyncio.create_task(streams.start())
        await until(lambda: pauses.active(STREAM_UNREACHABLE), "the pause")
        assert address in pauses.snapshot()[0]["detail"]
        assert not starting.done()
        listener = serve(ns, tmp_path / "host2" / "cdc.toml")
        ends = await asyncio.wait_for(starting, 60)
        assert ends == [txns[2].key, txns[3].key]
        assert not pauses.active(STREAM_UNREACHABLE)
        streams.send(1, batch(encoder[1], txns[4:5], txns[4].key))
        await streams.drain()
        await streams.sync()

        # host2's port serves stream 1 whole: each transaction once, in order, gapless
        await until(lambda: _status(status_file).get("gno") == 3, "stream 1's status")
        read = await asyncio.to_thread(read_server, address, stream_port(cfg.dumper, 1), "u", "pw")
        assert read.structure == [] and not read.tail
        assert [t.tso for t in read.txns] == [t.tso for t in txns[2:5]]
        sid = stream_server_uuid(CLUSTER_UUID, 1)
        assert [g for t in read.txns for g in t.gtids] == [f"{sid}:{n}" for n in (1, 2, 3)]
        assert [p.restarts for p in streams.processes] == [0, 2]
    finally:
        await streams.aclose()
        stop(listener)
    assert not (tmp_path / "binlog" / "stream1").exists()  # its files are host2's
    assert (tmp_path / "host2" / "binlog" / "stream1").is_dir()


def load_dumped(cfg, path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg.dump(path)
    return load(path)


def _status(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
