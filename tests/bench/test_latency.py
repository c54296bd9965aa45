"""The pure parts of `cdc bench latency`: its percentiles and the per-stage report (the bench
itself runs in `make bench BENCH_ARGS=--quick`: tests/bench/quick.py)."""

from __future__ import annotations

from bench import latency, latency_stages


def test_latency_percentiles():
    values = [float(v) for v in range(1, 101)]
    assert latency.percentile(values, 0.5) == 51
    assert latency.percentile(values, 0.99) == 100
    commits = [(1, 10.0), (2, 10.5), (3, 12.0), (4, 12.5)]
    lat, missing, warmup = latency.summarize(commits, {3: 12.1, 1: 10.2}, start=10.0)
    assert [round(v) for v in lat] == [100] and missing == 1  # tso 4 never seen; 1, 2 warm-up
    assert round(warmup) == 200  # tso 1, in the warm-up: not counted, but shown


def test_stage_report(tmp_path):
    """Stage files of three processes → per-step percentiles over the window, the last
    fragment of a transaction counting, event-loop pauses by process kind."""
    (tmp_path / "cn-1.tsv").write_text("commit\t7\t10.000\ncommit\t8\t10.010\n")
    (tmp_path / "source-dn1-2.tsv").write_text(
        "src\t7\t10.020\nsrc\t7\t10.030\nsrc\t8\t10.040\n"
        "lag\t50000\t10.1\nlag_run\t5000\t10.1\nlag_wait\t45000\t10.1\n"
    )
    (tmp_path / "leader-3.tsv").write_text(
        "".join(
            f"{stage}\t{tso}\t{t}\n"
            for tso, base in ((7, 10.030), (8, 10.040))
            for stage, t in (("lrecv", base + 0.001), ("merged", base + 0.01))
            for t in [t]
        )
        + "".join(f"written\t{tso}\t{10.06}\n" for tso in (7, 8))
        + "fsync\t12000\t10.2\n"
    )
    (tmp_path / "client-4.tsv").write_text("seen\t7\t10.070\nseen\t8\t10.080\n")
    report = latency_stages.read(tmp_path, 9.0, 11.0)
    assert report.transactions == 2
    p50, p99, top = report.steps[("commit", "src")]
    assert round(p50) == 30 and round(top) == 30  # tso 7: its last fragment at 10.030
    assert report.pauses["source"].count == 1 and report.pauses["source"].wait_ms == 45
    assert report.fsync_max_ms == 12
    text = "\n".join(latency_stages.describe(report, 2.0))
    assert "commit -> src" in text and "source 1" in text, text
