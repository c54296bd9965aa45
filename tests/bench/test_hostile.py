"""`cdc bench hostile` runs end to end at a tiny size and prints its ratio line. No timing
assertions: the figures are the bench's business, not the test's."""

from __future__ import annotations

from bench import hostile


def test_hostile_bench_runs(capsys):
    args = ["--seconds", "2", "--tps", "40", "--workers", "4", "--query-mb", "0.2"]
    args += ["--heartbeat-dumps", "1", "--stalled-dumps", "2", "--binlog-events-loops", "1"]
    assert hostile.main(args) == 0
    out = capsys.readouterr().out
    for field in ("without", "with", "ratio with/without hostile clients", "longest binlog pause"):
        assert field in out, out
