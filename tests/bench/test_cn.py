"""`cdc bench cn` runs end to end with tiny parameters and prints every mode and the ratios. No
timing assertions: the figures are the bench's business."""

from __future__ import annotations

from bench import cn


def test_cn_bench_runs(capsys):
    assert cn.main(["--dns", "2", "--seconds", "1", "--rounds", "1", "--workers", "4"]) == 0
    out = capsys.readouterr().out
    for label, *_ in cn.MODES:
        assert label in out, out
    assert "CN CPU per txn x" in out and "TPS on 2 idle cores" in out, out
