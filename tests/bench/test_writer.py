"""`cdc bench writer` runs end to end (tiny N) and prints its ratio."""

from __future__ import annotations

from bench.writer import format_result, main, run_bench


def test_bench_runs(tmp_path, capsys):
    r = run_bench(300, directory=str(tmp_path))
    assert r["events"] == 1500 and r["ratio_writer_vs_plain"] > 0
    assert "ratio vs plain" in format_result(r)
    assert main(["--txns", "50", "--dir", str(tmp_path), "--json"]) == 0
    assert '"ratio_writer_vs_plain"' in capsys.readouterr().out
