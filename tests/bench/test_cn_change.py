"""`cdc bench cn-change` runs end to end at a tiny size: a DDL pair and a scale-out under load,
the stalls printed, the transfer total unchanged. No timing assertions."""

from __future__ import annotations

from bench import cn_change


def test_cn_change_bench_runs(capsys):
    argv = ["--accounts", "100", "--workers", "2", "--baseline", "1", "--rounds", "1"]
    assert cn_change.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("  DDL ") == 2 and "  move " in out and "total balance unchanged" in out, out
    assert "ratio  longest write stall" in out, out
