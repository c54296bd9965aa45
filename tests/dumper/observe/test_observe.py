"""Observing a running dumper (issue 23, items 2 and 4): `cdc status` lists the consumers with
their lag (`--json` for scripts) and the Prometheus endpoint on `[dumper] metrics_port` is
scraped. One real pipeline (2 DNs, `cdc start` as a child process, a transfer workload through
the reference CN), real dump clients, the real CLI."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import Command
from cdc_equipment.cn import ComputeNode
from cdc_equipment.cn.workloads.runner import run_workload
from cdc_equipment.cn.workloads.transfer import TransferWorkload
from cdc_equipment.local_cluster.testing import free_base_port, throwaway_cluster
from tests.compat.conftest import cdc_start, tail

USER, PASSWORD = "repl", "repl"  # the cluster's default account


async def _traffic(cfg, seconds: float) -> None:
    cn = ComputeNode(cfg)
    await cn.start()
    try:
        transfer = TransferWorkload(cn, accounts=20, initial_balance=1000, partitions=2)
        await transfer.setup()
        await run_workload(transfer.step, threads=2, duration_s=seconds, tps=50)
    finally:
        await cn.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    directory = tmp_path_factory.mktemp("observe")
    cluster = throwaway_cluster(directory / "cluster", dns=2, spare_dns=0)
    try:
        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(directory / "binlog")
        cfg.dumper.port = free_base_port(1)
        cfg.dumper.metrics_port = cfg.dumper.port + 1
        with cdc_start(cfg, directory):
            asyncio.run(_traffic(cfg, 2.0))
            yield cfg, directory / "cdc.toml", directory / "pipeline.log"
    finally:
        cluster.down()


class StalledConsumer:
    """A blocking dump from the first file that reads only its first packet, in a thread."""

    def __init__(self, port: int, server_id: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = asyncio.run_coroutine_threadsafe(self._start(port, server_id), self.loop)
        self.client = self.client.result(30)

    async def _start(self, port: int, server_id: int) -> MysqlClient:
        c = await MysqlClient.connect("127.0.0.1", port, USER, PASSWORD)
        await c.query("SET @master_binlog_checksum = 'CRC32'")
        await c.send_command(Command.BINLOG_DUMP, struct.pack("<IHI", 4, 0, server_id))
        await c.read_packet()
        return c

    async def _close(self) -> None:
        self.client.close()
        await asyncio.sleep(0.1)  # the transport closes on a later turn of the loop

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def cdc(config_path: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "cdc_cli.main", *args, "--config", str(config_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    return out.stdout


def wait_for_status(config_path: Path, predicate, what: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = json.loads(cdc(config_path, "status", "--json"))
        if predicate(status):
            return status
        assert time.monotonic() < deadline, f"{what}: {json.dumps(status, indent=1)[:3000]}"
        time.sleep(0.5)


def test_status_lists_consumers_with_their_lag(live):
    cfg, config_path, log_path = live
    consumer = StalledConsumer(cfg.dumper.port, 4321)
    try:
        status = wait_for_status(
            config_path,
            lambda s: any(c["server_id"] == 4321 for c in s.get("consumers", [])),
            "the consumer in cdc status --json",
        )
        (mine,) = [c for c in status["consumers"] if c["server_id"] == 4321]
        assert mine["user"] == USER and mine["file"].startswith("binlog.")
        assert mine["lag_bytes"] >= 0 and not mine["follower"]
        assert status["binlog"]["files"] >= 1 and status["binlog"]["bytes"] > 0
        text = cdc(config_path, "status")
        assert "consumers: 1" in text and "4321" in text, text
    finally:
        consumer.close()
    wait_for_status(config_path, lambda s: s.get("consumers") == [], "the consumer gone")
    assert "Traceback" not in log_path.read_text(errors="replace"), tail(log_path)


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_metrics_endpoint_is_scraped(live):
    cfg, config_path, _ = live
    consumer = StalledConsumer(cfg.dumper.port, 4322)
    try:
        deadline = time.monotonic() + 30
        while True:
            m = scrape(cfg.dumper.metrics_port)
            lag = [
                s for s in m.get("cdc_consumer_lag_bytes", []) if s.labels["server_id"] == "4322"
            ]
            if lag and m.get("cdc_fsync_seconds_count", [None])[0]:
                if m["cdc_fsync_seconds_count"][0].value > 0:
                    break
            assert time.monotonic() < deadline, sorted(m)
            time.sleep(0.5)
    finally:
        consumer.close()
    one = {name: samples[0].value for name, samples in m.items()}
    assert one["cdc_global_tso"] > 0
    assert 0 <= one["cdc_written_lag_seconds"] < 60
    assert one["cdc_events_written_total"] > 0 and one["cdc_transactions_written_total"] > 0
    assert one["cdc_bytes_written_total"] > 0
    assert {s.labels["dn"] for s in m["cdc_dn_watermark_tso"]} == {"dn1", "dn2"}
    assert all(0 <= s.value < 60 for s in m["cdc_dn_lag_seconds"])
    assert one["cdc_consumers"] >= 1
    assert one["cdc_binlog_files"] >= 1 and one["cdc_binlog_bytes"] > 0
    assert "cdc_pipeline_restarts_total" in m and "cdc_server_process_restarts_total" in m
    assert "cdc_spilled_bytes_total" in m and "cdc_binlog_purged_files_total" in m
    assert "cdc_consumer_position" in m and "cdc_consumer_sent_bytes_total" in m
    # Every metric the Grafana dashboard plots exists (HA ones only with [[dumper.peers]]).
    dashboard = (Path(__file__).parents[3] / "docs" / "grafana-dashboard.json").read_text()
    plotted = set(re.findall(r"\bcdc_[a-z_]+", dashboard)) - {"cdc_ha_leader", "cdc_ha_term"}
    assert plotted - set(m) == set(), sorted(m)
