"""What `make bench BENCH_ARGS=--quick` (`cdc bench all --quick`) must print for each benchmark.

tests/readme runs that command once, as README prints it, and checks its output here; this
package's tests cover only what that run does not (the pure parts, the writer's API), instead of
starting every benchmark's cluster a second time. No timing assertions: the figures are the
benches' business."""

from __future__ import annotations

import re

from bench import cn

# What each benchmark's section (after its `== title` line) must say, by title prefix.
FIELDS = {
    "writer": ["ratio vs plain"],
    "fanout": ["p99 first event", "CPU s/served MB", "clients CPU s/MB"],
    "pipeline": ["pipeline bench:"],
    "snapshot-isolation": ["without", "with", "ratio with/without table readers"],
    "snapshot": [
        *("idle pipeline", "of keys changing", "ratio dumper/direct"),
        "keys changed after the read's position by its end",
        "the shards read directly while the same changes run",
    ],
    "as-of": ["as-of bench:", "as of the old point", "ratio as of the old point / at the end"],
    "latency": [
        *("achieved", "CN transaction", "p50", "p90", "p99", "max", "0 never seen"),
        "p99 at 2,000 TPS with 200 ms heartbeats",
        *("CPU per transaction", "idle cores at these costs", "commit -> src"),
        *("written -> seen", "event-loop pauses"),
        "machine (",
    ],
    "cn-change": ["  move ", "total balance unchanged", "ratio  longest write stall"],
    "cn": [label for label, *_ in cn.MODES] + ["CN CPU per txn x", "TPS on 2 idle cores"],
    "scale": ["effective ev/s", "by CPU per effective event"],
    "streams": [
        *("streams bench:", "catch-up", "events/s", "merge", "writers (each)"),
        "merge CPU per DN event, 2 streams / 1:",
    ],
    "hostile": ["without", "with", "ratio with/without hostile clients", "longest binlog pause"],
}


def sections(out: str) -> dict[str, str]:
    """Each benchmark's output by its title (the text after `== `)."""
    parts = re.split(r"^== (.+)$", out, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def check(out: str) -> None:
    found = sections(out)
    for prefix, fields in FIELDS.items():
        titles = [t for t in found if t == prefix or t.startswith(prefix + ":")]
        assert titles, f"`cdc bench all --quick` ran no {prefix!r} benchmark:\n{out[-3000:]}"
        for title in titles:
            missing = [f for f in fields if f not in found[title]]
            assert not missing, f"bench {title!r} did not print {missing}:\n{found[title]}"
    fanout = found["fanout"].strip().splitlines()
    header = next(i for i, line in enumerate(fanout) if "p99 first event" in line)
    assert [line.split()[:2] for line in fanout[header + 1 : header + 5]] == [
        ["1", "mariadbd"],
        ["1", "dumper"],
        ["4", "mariadbd"],
        ["4", "dumper"],
    ], fanout
    assert any(line.startswith("ratio dumper/mariadbd at 4 clients:") for line in fanout), fanout
    assert found["cn-change"].count("  DDL ") == 2, found["cn-change"]
    assert re.search(r"throughput \d+ DNs / \d+ DNs", found["scale"]), found["scale"]
    # One row per stream count asked for (--streams=1,2): its count first.
    rows = [line.split()[0] for line in found["streams"].splitlines() if line.startswith("  ")]
    assert rows[1:] == ["1", "2"], found["streams"]
    # The pipeline bench generated at least the DN events it was asked for (--events=10000).
    events = re.search(r"([\d,]+) DN events", found["pipeline"])
    assert events and int(events.group(1).replace(",", "")) >= 10_000, found["pipeline"]
    # The summary at the end: every bench's figures beside their goals (bench/goals.py).
    summary = found["summary: each figure beside its goal (bench/goals.py)"]
    assert re.search(r"^  \d+ figures: \d+ met, .* 0 of \d+ benches failed$", summary, re.M), (
        summary
    )
    assert "catch-up speed / raw dump of the DN binlogs" in summary, summary
