"""Fuzz the SQL splitter, tokenizer and parser (dumper/server/sql/) with long inputs: literals,
unquoted identifiers, runs of quotes, escapes and comments of up to megabytes (issue 19: a 1 MB
literal once took 220 MB in sql.parse). Every input must end in a statement or a SqlError —
never another exception — using memory linear in its size. `make test` runs a few examples of
up to 256 KB plus fixed 1 MB ones; `make fuzz` (CDC_FUZZ_EXAMPLES) runs more, up to 16 MB."""

from __future__ import annotations

import tracemalloc

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dumper.server import sql
from tests.fuzz_support import examples

LONG_RUN = examples(0) > 0
EXAMPLES = min(examples(0), 1000) if LONG_RUN else 25
MAX_SIZE = (16 << 20) if LONG_RUN else (256 << 10)
# Peak bytes allocated while parsing, per byte of input, plus a fixed part for the token list
# (sql.MAX_TOKENS tokens of ~130 bytes at most). The old regexes needed ~300 per byte.
BYTES_PER_BYTE = 16
FIXED = 16 << 20

# What hostile SQL is made of: quotes of each kind, escapes, doubled quotes, comment openers
# and closers (nested ones too), executable comments, separators, digits and exponents.
PIECES = [
    "a", "Z_$9", "'", "\\'", "''", "\\\\", "\\", '"', '""', "`", "``", "/*", "*/", "/*!",
    "/*M!100", "-- ", "--", "#", "\n", " ", "\t", ";", ",", "(", ")", "=", "9", "1.5", "e",
    "1e308", "1e999", "@", "@@", "@@global.", ".", "é", "\u2603", "SELECT ", "SET @a = ",
    "LIMIT ", "FROM ",
]  # fmt: skip
PREFIXES = [
    "", "SELECT ", "SET @x = ", "SET ", "SHOW BINLOG EVENTS IN ", "SHOW BINLOG EVENTS FROM ",
    "SELECT 1 LIMIT ", "KILL ", "SHOW VARIABLES LIKE ", "PURGE BINARY LOGS TO ", "USE ",
]  # fmt: skip


def build(prefix: str, runs: list[tuple[list[str], int]], closer: str) -> str:
    """The prefix, then each run's pieces repeated, cut at MAX_SIZE, then the closer."""
    parts, size = [prefix], len(prefix)
    for pieces, repeat in runs:
        unit = "".join(pieces)
        repeat = min(repeat, (MAX_SIZE - size) // max(len(unit), 1))
        if repeat <= 0:
            break
        parts.append(unit * repeat)
        size += len(unit) * repeat
    parts.append(closer)
    return "".join(parts)


def parse_all(text: str) -> None:
    """What the session does with a COM_QUERY's text; only SqlError may come out."""
    for stmt in sql.split_statements(text):
        try:
            sql.parse(stmt)
        except sql.SqlError:
            pass


def check_linear(text: str) -> None:
    tracemalloc.start()
    try:
        parse_all(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = len(text.encode())
    assert peak < BYTES_PER_BYTE * size + FIXED, f"{peak} bytes peak for a {size}-byte query"


MB = 1 << 20


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    prefix=st.sampled_from(PREFIXES),
    runs=st.lists(
        st.tuples(
            st.lists(st.sampled_from(PIECES), min_size=1, max_size=4),
            st.integers(1, MAX_SIZE),
        ),
        min_size=1,
        max_size=4,
    ),
    closer=st.sampled_from(["", "'", '"', "`", "*/", "\n", ";", "'; SELECT 1"]),
)
# Fixed long examples that `make test` always runs: the shapes of issue 19.
@example(prefix="SELECT ", runs=[(["'"], 1), (["a"], MB)], closer="'")  # 1 MB literal
@example(prefix="SELECT ", runs=[(["Z_$9"], MB // 4)], closer="")  # 1 MB identifier
@example(prefix="", runs=[(["a"], MB)], closer="")  # 1 MB of unquoted garbage
@example(prefix="SELECT '", runs=[(["\\'", "''"], MB // 4)], closer="'")  # escapes
@example(prefix="SELECT 1 ", runs=[(["/*", "'", "*/"], MB // 5)], closer="")  # comments
@example(prefix="SELECT ", runs=[(["/*!", "'a'"], MB // 7)], closer="")  # unterminated
@example(prefix="SELECT ", runs=[(["9"], 5000)], closer="")  # 5,000-digit literal
@example(prefix="SELECT 1 LIMIT ", runs=[(["9"], 30)], closer="")  # LIMIT beyond 2^64
@example(prefix="SELECT ", runs=[(["1", ","], MB // 2)], closer="1")  # many tokens
@example(prefix="", runs=[(["SELECT 1", ";"], MB // 9)], closer="")  # many statements
@example(prefix="SELECT ", runs=[(["a", "'"], MB // 2)], closer="")  # a quote every other byte
@example(prefix="", runs=[([";"], MB)], closer="")  # a megabyte of empty statements
@example(prefix="SELECT 1", runs=[(["-"], MB)], closer="")  # minus signs, no comment
@example(prefix="SET @x = ", runs=[(["--"], 6890)], closer="")  # signs: once a RecursionError
@example(prefix="SET @x = ", runs=[(["("], 5000)], closer="1")  # parentheses: once too
def test_long_sql_is_parsed_in_linear_memory(prefix, runs, closer):
    check_linear(build(prefix, runs, closer))
