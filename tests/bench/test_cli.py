"""`cdc bench ...` hands its options to the benchmark's own parser (the benches themselves run
in tests/readme's `make bench BENCH_ARGS=--quick`)."""

from __future__ import annotations

import pytest

from bench import snapshot_isolation
from cdc_cli.main import build_parser


@pytest.mark.parametrize(
    "extra",
    [[], ["--quick"], ["--and-hostile"], ["--quick", "--and-hostile"], ["--quick", "--as-of"]],
)
def test_snapshot_isolation_options_reach_the_bench(monkeypatch, extra):
    seen: list[list[str]] = []
    monkeypatch.setattr(snapshot_isolation, "main", lambda argv: seen.append(argv) or 0)
    args = build_parser().parse_args(["bench", "snapshot-isolation", "--readers", "2", *extra])
    assert args.func(args) == 0
    (argv,) = seen
    assert "--readers=2" in argv
    assert [a for a in argv if a in ("--quick", "--and-hostile", "--as-of")] == extra
