"""Time and peak RSS of splitting + parsing one long statement, in a fresh process (the issue-19
figures in docs/dumper.md): `python -m tests.dumper.measure_sql CASE MB [--trace]`, CASE one of
literal, escapes, identifier, unquoted, comments. RSS is the peak above the process before
parsing, i.e. on top of the input string itself; --trace adds tracemalloc's peak (slower)."""

from __future__ import annotations

import resource
import sys
import time
import tracemalloc

from dumper.server import sql

CASES = {
    "literal": lambda n: "SELECT '" + "a" * n + "'",
    "escapes": lambda n: "SELECT '" + "\\n" * (n // 2) + "'",
    "identifier": lambda n: "SELECT " + "a" * n,
    "unquoted": lambda n: "x" * n,
    "comments": lambda n: "SELECT 1 " + "/* c */" * (n // 7),
}


def main() -> None:
    case, mb = sys.argv[1], int(sys.argv[2])
    trace = "--trace" in sys.argv
    text = CASES[case](mb << 20)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    try:
        result = [type(sql.parse(s)).__name__ for s in sql.split_statements(text)][:1]
    except sql.SqlError as exc:
        result = [f"ERR {exc.code}"]
    took = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    traced = (
        f", tracemalloc peak {tracemalloc.get_traced_memory()[1] / 2**20:.1f} MB" if trace else ""
    )
    print(
        f"{case} {mb} MB: {took:.3f} s, peak RSS +{(peak - base) / 1024:.1f} MB{traced} -> "
        f"{result[0]}"
    )


if __name__ == "__main__":
    main()
