"""`cdc bench latency` and `cdc bench scale` run end to end with tiny parameters and print their
fields. No timing assertions: the figures are the benches' business, not the tests'."""

from __future__ import annotations

from dumper import bench_latency, bench_pipeline, bench_scale


def test_latency_bench_runs(capsys):
    args = [
        "--tps",
        "40",
        "--seconds",
        "2",
        "--dns",
        "2",
        "--workers",
        "4",
        "--heartbeat-ms",
        "100",
    ]
    assert bench_latency.main(args) == 0  # 0: every committed transaction reached the client
    out = capsys.readouterr().out
    for field in (
        "achieved",
        "CN transaction",
        "p50",
        "p90",
        "p99",
        "max",
        "0 never seen",
        "goal p99",
    ):
        assert field in out, out


def test_latency_percentiles():
    values = [float(v) for v in range(1, 101)]
    assert bench_latency.percentile(values, 0.5) == 51
    assert bench_latency.percentile(values, 0.99) == 100
    commits = [(1, 10.0), (2, 10.5), (3, 12.0), (4, 12.5)]
    lat, missing = bench_latency.summarize(commits, {3: 12.1, 1: 10.2}, start=10.0)
    assert [round(v) for v in lat] == [100] and missing == 1  # tso 4 never seen; 1, 2 warm-up


def test_scale_bench_runs(capsys):
    assert bench_scale.main(["--dns", "1,2", "--events", "400", "--threads", "4"]) == 0
    out = capsys.readouterr().out
    assert "effective ev/s" in out and "throughput 2 DNs / 1 DNs" in out, out


def test_pipeline_bench_generates_the_dn_events_asked_for():
    r = bench_pipeline.measure(2, dn_events=6000, threads=4)
    assert r.dn_events >= 6000  # transfers and bulk lines until the DN binlogs hold them
    assert r.effective > 0 and r.transactions > 0 and r.ratio > 0
