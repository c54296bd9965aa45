"""Shared by the fuzz tests: how many examples (CDC_FUZZ_EXAMPLES: the long run sets 100000),
and a module fixture that prints the process RSS before and after and bounds its growth."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Hypothesis remembers what it explored (its data tree grows with the examples), so the bound
# allows a fixed overhead plus a little per example; a leak per example (a session, a buffer, a
# reader) costs far more than that.
RSS_GROWTH_MB = 200
RSS_PER_EXAMPLE_KB = 2


def examples(default: int) -> int:
    return int(os.environ.get("CDC_FUZZ_EXAMPLES", default))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory_bound(count: int):
    """A module fixture: `count` examples per test of the module, bounded RSS growth."""

    @pytest.fixture(scope="module", autouse=True)
    def bounded_memory(request):
        before = rss_mb()
        yield
        after = rss_mb()
        limit = RSS_GROWTH_MB + count * RSS_PER_EXAMPLE_KB / 1024
        print(
            f"\n{request.module.__name__}: {count} examples per test, "
            f"RSS {before:.0f} -> {after:.0f} MB (limit +{limit:.0f} MB)"
        )
        assert after - before < limit, f"RSS grew {after - before:.0f} MB"

    return bounded_memory
