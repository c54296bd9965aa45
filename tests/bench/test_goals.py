"""bench/goals.py: the verdict printed beside a figure, and `cdc bench all`'s summary of every
bench's figures against their goals (without running a bench: each is replaced by a stub that
prints its figures as a bench does)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from bench import goals
from bench.goals import GOALS, BenchRun, Figures, summary
from cdc_cli.main import build_parser

BENCH = Path(goals.__file__).parent


def test_verdicts():
    figures = Figures()
    assert figures.goal("pipeline", 1.02) == "(goal >= 1: met)"
    assert figures.goal("fanout", 0.88, "1 client") == "(goal >= 0.9: not met)"
    assert figures.goal("big-txn", 120, unmeasured="ran 16 MB") == (
        "(goal <= 300 MB: not measured, ran 16 MB)"
    )
    assert figures.goal("latency", 100) == "(goal <= 100 ms: met)"  # a ceiling holds at it
    assert [f.status for f in figures.measured] == ["met", "not met", "not measured", "met"]
    assert figures.measured[1].label() == "dumper / mariadbd MB/s, 1 client"
    with pytest.raises(KeyError):
        figures.goal("no such goal", 1.0)


def test_the_goals_of_issue_43():
    assert GOALS["pipeline"].bound == 1.0 and not GOALS["pipeline"].ceiling
    assert GOALS["pipeline-cpu"].ceiling and GOALS["pipeline-cpu"].bound == pytest.approx(1.85)
    assert GOALS["backfill"].bound == 0.9
    assert GOALS["fanout"].bound == 0.9
    assert GOALS["snapshot"].bound == 0.5 and GOALS["snapshot-changed"].bound == 5.0
    assert GOALS["latency"].bound == 100 and GOALS["latency"].ceiling
    assert GOALS["hostile"].bound == GOALS["snapshot-isolation"].bound == 0.95
    assert GOALS["streams"].ceiling and 1.0 <= GOALS["streams"].bound <= 1.1


def test_every_goal_a_bench_names_is_in_the_table():
    """A goal's name in a bench is a string: a typo would fail only when that bench prints it."""
    named = set()
    for path in BENCH.glob("*.py"):
        text = path.read_text()
        named |= set(re.findall(r"figures\.goal\(\s*[\"']([\w-]+)[\"']", text))
        named |= set(re.findall(r"describe\([^)]*figures,\s*\"([\w-]+)\"", text))
        named |= set(re.findall(r"goal: str = \"([\w-]+)\"", text))  # describe's default
    assert "snapshot-isolation" in named and "pipeline-cpu" in named
    assert named <= set(GOALS), named - set(GOALS)
    assert set(GOALS) <= named, f"goals no bench prints: {set(GOALS) - named}"


def test_summary():
    met, not_met = Figures(), Figures()
    met.goal("dumper", 0.93)
    not_met.goal("fanout", 0.88, "1 client")
    not_met.goal("fanout", 1.2, "4 clients")
    not_met.goal("latency", 83.4, unmeasured="the CN reached 1,136 of 2,000 TPS")
    lines = summary(
        [
            BenchRun("dumper", met),
            BenchRun("fanout", not_met),
            BenchRun("cn", Figures()),
            BenchRun("big-txn", Figures(), failed=True),
        ]
    ).splitlines()
    rows = {line.split(" (")[0].strip(): line for line in lines}
    assert "dumper" in rows and "cn: no goal" in rows and "big-txn: FAILED" in rows
    assert re.search(r"dumper / mariadbd, one binlog file +0\.93 +>= 0\.8 +met$", lines[2])
    fanout = [line for line in lines if "MB/s" in line]
    assert fanout[0].split()[-2:] == ["not", "met"] and fanout[0].split()[-5] == "0.88"
    assert fanout[1].endswith(" met") and "4 clients" in fanout[1]
    assert "83 ms" in lines[6] and "<= 100 ms" in lines[6]
    assert lines[6].endswith("not measured (the CN reached 1,136 of 2,000 TPS)")
    assert lines[-1] == "  4 figures: 2 met, 1 not met, 1 not measured; 1 of 4 benches failed"
    assert "failed:" not in "\n".join(lines)  # tests/readme's sign of a failed bench


BENCHES = {
    "writer": "writer",
    "dumper": "dumper",
    "fanout": "fanout",
    "merge_source": "merge-source",
    "pipeline": "pipeline",
    "backfill": "backfill",
    "snapshot": "snapshot",
    "as_of": "as-of",
    "snapshot_isolation": "snapshot-isolation",
    "latency": "latency",
    "cn": None,
    "cn_change": None,
    "scale": "scale",
    "streams": "streams",
    "hostile": "hostile",
    "big_txn": "big-txn",
}


def test_bench_all_prints_the_summary(monkeypatch, capsys):
    """Each bench's figures land in the summary under its title; a bench that raises does not
    stop the others and is listed as failed."""

    def stub(module: str, goal: str | None):
        def main(argv, figures):
            if module == "big_txn":
                raise RuntimeError("no room for 1 GB")
            if goal is not None:
                print(f"ratio {figures.goal(goal, 0.97)}")
            return 0

        return main

    for module, goal in BENCHES.items():
        monkeypatch.setattr(importlib.import_module(f"bench.{module}"), "main", stub(module, goal))
    args = build_parser().parse_args(["bench", "all", "--quick"])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    summary_text = out.split("== summary: each figure beside its goal (bench/goals.py)\n")[1]
    assert "  big-txn (1 GB; --quick: 16 MB): FAILED" in summary_text
    assert "  cn: no goal" in summary_text and "  cn-change: no goal" in summary_text
    assert "    catch-up speed / raw dump of the DN binlogs" in summary_text
    assert "    binlog growth with / without hostile clients" not in summary_text  # --quick: none
    assert summary_text.rstrip().endswith("failed: big-txn (1 GB; --quick: 16 MB)")
