"""`cdc bench snapshot` runs end to end at a tiny size and prints its table. No timing
assertions: the figures are the bench's business, not the test's (the bench itself asserts
that both reads return every row)."""

from __future__ import annotations

from bench import snapshot


def test_snapshot_bench_runs(capsys):
    assert snapshot.main(["--rows", "3000", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for field in ("idle pipeline", "of keys changing", "ratio dumper/direct"):
        assert field in out, out
