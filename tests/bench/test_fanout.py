"""`cdc bench fanout` runs end to end at its quick size and prints its table and the ratio line
last. No timing assertions: the figures are the bench's business, not the test's."""

from __future__ import annotations

from bench import fanout


def test_fanout_bench_runs(capsys):
    assert fanout.main(["--quick"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert "p99 first event" in out[1] and "CPU s/served MB" in out[1], out
    assert [line.split()[:2] for line in out[2:6]] == [
        ["1", "mariadbd"],
        ["1", "dumper"],
        ["4", "mariadbd"],
        ["4", "dumper"],
    ], out
    assert out[-1].startswith("ratio dumper/mariadbd at 4 clients:"), out
