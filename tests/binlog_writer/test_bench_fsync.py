"""The writer bench runs end to end (tiny N), and the fsync policy decides as documented."""

from __future__ import annotations

import pytest

from binlog_writer.bench import format_result, main, run_bench
from binlog_writer.fsync import FsyncMode, FsyncPolicy


def test_bench_runs(tmp_path, capsys):
    r = run_bench(300, directory=str(tmp_path))
    assert r["events"] == 1500 and r["ratio_writer_vs_plain"] > 0
    assert "ratio vs plain" in format_result(r)
    assert main(["--txns", "50", "--dir", str(tmp_path), "--json"]) == 0
    assert '"ratio_writer_vs_plain"' in capsys.readouterr().out


def test_fsync_policy():
    assert FsyncPolicy.per_txn().due(1, 0)
    assert not FsyncPolicy.per_txn().due(0, 1e9)
    g = FsyncPolicy.every(3)
    assert [g.due(n, 0) for n in (1, 2, 3)] == [False, False, True]
    i = FsyncPolicy.interval(50)
    assert not i.due(10, 49.9) and i.due(1, 50)
    assert not FsyncPolicy.never().due(10**6, 1e9)
    assert FsyncPolicy.parse("group:8") == FsyncPolicy(FsyncMode.GROUP, group_size=8)
    assert FsyncPolicy.parse("interval:20").interval_ms == 20
    with pytest.raises(ValueError):
        FsyncPolicy.parse("sometimes")
    with pytest.raises(ValueError):
        FsyncPolicy.every(0)
