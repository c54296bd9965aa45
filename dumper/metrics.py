"""Prometheus metrics of a dumper process on `[dumper] metrics_port` (docs/dumper.md "Metrics").

One endpoint per dumper process, served by the leader process: what the server process knows
(its consumers, retention's purges) reaches the leader anyway, in the report it sends twice a
second (`dumper/server/serve_process.py`), and is part of the status snapshot the leader
writes every second for `cdc status`. So the metrics are that snapshot — the same numbers as
`cdc status --json`, at most ~1 s old — plus the fsync latency histogram, observed by the
writer itself. No prometheus multiprocess mode (no directory of mmap files to clean up), and a
registry of our own, not the process-global default one.

The HTTP server is prometheus_client's, in a daemon thread; a scrape only reads the last
snapshot (a reference swapped by the event loop), never the pipeline's live objects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from binlog_writer import file_number
from cdc.pauses import REASONS
from cdc.tso_layout import physical_ms

log = logging.getLogger(__name__)

# fsync of the binlog: from well under a millisecond (page cache, tmpfs) to seconds (a busy disk)
FSYNC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def _tso_s(tso: int) -> float:
    return physical_ms(tso) / 1000


def _file_number(name: str | None) -> int:
    try:
        return file_number(str(name))
    except ValueError:
        return 0  # not started yet


def _pauses(pauses: list[dict], now: float) -> Metric:
    """One series per reason a pipeline pauses for (`cdc.pauses.REASONS`), 0 while it does
    not: how long it has waited for that dependency (docs/faults.md)."""
    g = GaugeMetricFamily(
        "cdc_paused_seconds",
        "how long the pipeline has been waiting for a dependency at fault (0: not waiting)",
        labels=["reason"],
    )
    since = {p["reason"]: p["since"] for p in pauses}
    for reason in dict.fromkeys([*REASONS, *since]):
        g.add_metric([reason], max(now - since[reason], 0.0) if reason in since else 0.0)
    return g


class _StatusCollector(Collector):
    def __init__(self, snapshot: Callable[[], dict | None]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        status = self._snapshot()
        if status is None:
            return
        yield from _from_status(status, time.time())


def _gauge(name: str, doc: str, value: float | None, labels: dict[str, str] | None = None):
    g = GaugeMetricFamily(name, doc, labels=list(labels or {}))
    if value is not None:
        g.add_metric(list((labels or {}).values()), value)
    return g


def _from_status(st: dict[str, Any], now: float) -> Iterator[Metric]:
    """Metric families from one status snapshot (`cdc status --json`)."""
    yield _pauses(st.get("pauses", []), now)
    ha = st.get("ha")
    if ha is not None:
        yield _gauge("cdc_ha_leader", "1 while this dumper leads (HA)", ha["role"] == "leader")
        yield _gauge("cdc_ha_term", "the HA term this dumper knows", ha.get("term") or 0)
    if "last_tso" in st:
        yield _gauge("cdc_global_tso", "commit TSO of the last written transaction", st["last_tso"])
        written = st["last_tso"]
        yield _gauge(
            "cdc_written_lag_seconds",
            "now minus the commit time (TSO) of the last written transaction",
            max(now - _tso_s(written), 0.0) if written else None,
        )
        lag_ms = st.get("lag_ms")
        yield _gauge(
            "cdc_merge_lag_seconds",
            "now minus the merge's low watermark (what the slowest DN lets through)",
            lag_ms / 1000 if lag_ms is not None else None,
        )
        for name, key, doc in (
            ("cdc_events_written", "events", "binlog events written"),
            ("cdc_transactions_written", "transactions", "transactions written"),
            ("cdc_bytes_written", "bytes", "binlog bytes written"),
            ("cdc_pipeline_restarts", "restarts", "pipeline restarts after a MergeSource died"),
            ("cdc_spilled_bytes", "spilled_bytes", "bytes of huge transactions spilled to disk"),
        ):
            c = CounterMetricFamily(name, doc + " (this leader term)")
            c.add_metric([], st.get(key, 0))
            yield c
        wm = GaugeMetricFamily("cdc_dn_watermark_tso", "each DN's watermark TSO", labels=["dn"])
        lag = GaugeMetricFamily(
            "cdc_dn_lag_seconds", "now minus each DN's watermark time", labels=["dn"]
        )
        for dn in st.get("dns", []):
            tso = dn.get("watermark_tso")
            if tso:
                wm.add_metric([dn["name"]], tso)
                lag.add_metric([dn["name"]], max(now - _tso_s(tso), 0.0))
        yield wm
        yield lag
    restarts = CounterMetricFamily(
        "cdc_server_process_restarts", "restarts of the protocol server's process"
    )
    restarts.add_metric([], st.get("server_restarts", 0))
    yield restarts
    if st.get("streams"):
        yield from _streams(st["streams"], now)
    binlog = st.get("binlog")
    if binlog is not None:
        yield _gauge("cdc_binlog_files", "binlog files kept", binlog["files"])
        yield _gauge("cdc_binlog_bytes", "bytes of the binlog files kept", binlog["bytes"])
        purged = CounterMetricFamily("cdc_binlog_purged_files", "files purged by retention")
        purged.add_metric([], binlog["purged_files"])
        yield purged
    holds = st.get("consumer_holds")
    if holds is not None:
        yield from _holds(holds)
    consumers = st.get("consumers")
    if consumers is not None:
        yield _gauge("cdc_consumers", "connected dump clients", len(consumers))
        labels = ["id", "user", "host", "server_id", "follower"]
        fams = {
            "file": GaugeMetricFamily(
                "cdc_consumer_file", "number of the file a consumer reads", labels=labels
            ),
            "position": GaugeMetricFamily(
                "cdc_consumer_position", "position in that file", labels=labels
            ),
            "lag_bytes": GaugeMetricFamily(
                "cdc_consumer_lag_bytes", "bytes between it and the end", labels=labels
            ),
            "lag_s": GaugeMetricFamily(
                "cdc_consumer_lag_seconds",
                "seconds since it last had everything it may be sent",
                labels=labels,
            ),
            "bytes": CounterMetricFamily(
                "cdc_consumer_sent_bytes", "binlog bytes sent to it", labels=labels
            ),
        }
        for c in consumers:
            values = [
                str(c["id"]),
                c["user"],
                c["host"],
                str(c["server_id"]),
                "1" if c["follower"] else "0",
            ]
            fams["file"].add_metric(values, _file_number(c["file"]))
            for key in ("position", "lag_bytes", "lag_s", "bytes"):
                fams[key].add_metric(values, c[key])
        yield from fams.values()


def _holds(holds: dict) -> Iterator:
    """The named consumers' holds (docs/retention.md): a drop is counted, never silent."""
    dropped = CounterMetricFamily(
        "cdc_consumer_holds_dropped", "holds of named consumers dropped past their caps"
    )
    dropped.add_metric([], holds["dropped"])
    yield dropped
    labels = ["name"]
    fams = {
        "lag_bytes": GaugeMetricFamily(
            "cdc_consumer_hold_lag_bytes", "bytes a named consumer has not read", labels=labels
        ),
        "lag_s": GaugeMetricFamily(
            "cdc_consumer_hold_lag_seconds", "seconds a named consumer is behind", labels=labels
        ),
        "dropped": GaugeMetricFamily(
            "cdc_consumer_hold_is_dropped", "1: its hold was dropped past a cap", labels=labels
        ),
    }
    for c in holds["consumers"]:
        fams["lag_bytes"].add_metric([c["name"]], c["lag_bytes"])
        fams["lag_s"].add_metric([c["name"]], c["lag_s"])
        fams["dropped"].add_metric([c["name"]], 1 if c["dropped"] else 0)
    yield from fams.values()


class DumperMetrics:
    """The metrics of one dumper process: `update(status)` from the status loop, `fsync` for
    the writer (`BinlogWriter.on_fsync`), `start(host, port)` serves them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._status: dict | None = None
        self.fsync = Histogram(
            "cdc_fsync_seconds",
            "fsync of the binlog file by the writer",
            buckets=FSYNC_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StatusCollector(lambda: self._status))
        self._server = None

    def update(self, status: dict) -> None:
        self._status = status  # one reference swap: a scrape in the HTTP thread reads either

    def attach(self, writer: Any) -> None:
        """Observe `writer`'s fsyncs (a new leader term has a new writer: called each update)."""
        if writer is not None and getattr(writer, "on_fsync", None) is None:
            writer.on_fsync = self.fsync.observe

    def start(self, host: str, port: int) -> None:
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        log.info("metrics on http://%s:%d/metrics", host, port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _streams(streams: list[dict], now: float) -> Iterator[Metric]:
    """`[dumper] streams` > 1: each stream as its process last reported it (docs/streams.md);
    each stream's own metrics port has the rest."""
    labels = ["stream", "port"]
    fams = {
        "last_tso": GaugeMetricFamily(
            "cdc_stream_tso", "commit TSO of each stream's last transaction", labels=labels
        ),
        "gno": GaugeMetricFamily(
            "cdc_stream_gtid", "each stream's last GTID number", labels=labels
        ),
        "transactions": CounterMetricFamily(
            "cdc_stream_transactions_written", "transactions each stream wrote", labels=labels
        ),
        "bytes": CounterMetricFamily(
            "cdc_stream_bytes_written", "binlog bytes each stream wrote", labels=labels
        ),
    }
    lag = GaugeMetricFamily(
        "cdc_stream_lag_seconds", "now minus each stream's merged TSO time", labels=labels
    )
    for s in streams:
        values = [str(s["stream"]), str(s["port"])]
        for key, fam in fams.items():
            fam.add_metric(values, s.get(key) or 0)
        if s.get("merged_tso"):
            lag.add_metric(values, max(now - _tso_s(s["merged_tso"]), 0.0))
    yield from fams.values()
    yield lag
