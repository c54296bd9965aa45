"""`cdc bench as-of`: `SELECT *` of a logical table through the dumper as of an old point (`AS
OF 'file':pos`, taken before `--traffic` CN transactions changed the table) beside the same read
at the end, interleaved rounds in one run (docs/snapshot-reads.md, "As of a past point"): rows/s
of each and their ratio, the global binlog written after the point, and the memory the old read
held (the serving process's peak RSS above what it had before the reads).

The read as of the point takes the table's changed keys after it from the server's index of
changed keys (read_path/change_index.py, built off the loop once a read starts far back: the
bench's first read as of the point starts it and scans, printed apart; the bench then waits
until the serving process is idle again) and scans only what the index does not cover (the point's own 1 MB segment and the newest one), then keeps one entry per key changed
since (its before-image as bytes). The traffic is the snapshot bench's CN updates
(`CHANGE_TXN_KEYS` keys a transaction, keys drawn with repeats: a key changed twice keeps one
entry), all on the table read: the worst case for the read. An hour of traffic cannot run in a
bench; the output says what share of an hour of the demo's traffic (`DEMO_ROWS_PER_S` row
changes a second) the traffic is, and `--hour` generates that many row changes (the same count
of changes, in transactions of 100 keys, as fast as the CN goes). The goal (bench/goals.py) is a
ratio >= 0.5."""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

import pymysql

from bench.goals import Figures
from bench.snapshot import (
    CHANGE_TXN_KEYS,
    TABLE,
    KeyChanges,
    MariadbClient,
    loaded_pipeline,
    serve_pid,
)

# `cdc demo`'s traffic (docs/performance.md: ~90 transfer + ~100 order TPS, each changing about
# two rows): the row changes of an hour of it, which `--hour` makes on the table read.
DEMO_ROWS_PER_S = 380
HOUR_ROWS = DEMO_ROWS_PER_S * 3600
SETTLE_S = 120.0  # at most this long for the serving process to finish indexing


def _cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of `pid` so far (0 where /proc has none)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _settle(pid: int | None) -> float:
    """Until the serving process's CPU use stays under 10 % for a second (its index of the
    traffic built); the seconds waited."""
    started = time.monotonic()
    while pid is not None and time.monotonic() - started < SETTLE_S:
        before = _cpu_s(pid)
        time.sleep(1.0)
        if _cpu_s(pid) - before < 0.1:
            break
    return time.monotonic() - started


def _rss_kb(pid: int | None, field: str) -> int:
    """`VmRSS` or `VmHWM` (the peak) of `pid`, in kB (0 where /proc has none)."""
    if pid is None:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_peak(pid: int | None) -> None:
    """Linux: writing 5 to clear_refs resets VmHWM to the current RSS (each read's own peak)."""
    if pid is not None:
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        except OSError:
            pass


def run(rows: int, traffic: int, rounds: int, hot: int = 0) -> dict:
    from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER

    out: dict = {"end_s": [], "old_s": [], "old_peak_kb": [], "end_peak_kb": []}
    with loaded_pipeline("cdc-bench-as-of-", rows) as (cfg, pipeline):
        time.sleep(1)  # the load's last transactions reach the global binlog
        conn = pymysql.connect(
            host="127.0.0.1",
            port=cfg.dumper.port,
            user=DEFAULT_USER,
            password=DEFAULT_PASSWORD,
        )
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
        serve = serve_pid(pipeline.pid)
        _settle(serve)
        out["rss_start_kb"] = _rss_kb(serve, "VmRSS")
        rng = random.Random(42)
        drawn = min(hot, rows) if hot else rows
        keys = [rng.randrange(drawn) for _ in range(traffic * CHANGE_TXN_KEYS)]
        started = time.monotonic()
        changes = KeyChanges(cfg, keys, 0)
        changes.start()
        changes.join()
        changes.stop()
        out["traffic_s"] = time.monotonic() - started
        out["changed"] = len(set(keys))
        time.sleep(1)  # the traffic's last transactions reach the global binlog
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            names = [(n, int(size)) for n, size, *_ in cur.fetchall()]
        conn.close()
        after = [size for n, size in names if n >= file]
        out["binlog_after_mb"] = (sum(after) - int(pos)) / 1e6
        out["settle_s"] = _settle(serve)
        out["rss_before_kb"] = _rss_kb(serve, "VmRSS")
        point = f"AS OF '{file}':{pos}"
        # The server builds its index once a read starts far back: this first read scans
        # (beside the index's building), the rounds below find it built.
        client = MariadbClient("127.0.0.1", cfg.dumper.port, DEFAULT_USER, DEFAULT_PASSWORD)
        n, out["first_s"] = client.select(f"SELECT * FROM {TABLE} {point}")
        assert n == rows, f"first: {n} rows, {rows} loaded"
        out["index_s"] = _settle(serve)
        out["rss_index_kb"] = _rss_kb(serve, "VmRSS")
        for _ in range(rounds):  # interleaved: the machine's noise hits both alike
            for name, sql in (("end", ""), ("old", point)):
                client = MariadbClient("127.0.0.1", cfg.dumper.port, DEFAULT_USER, DEFAULT_PASSWORD)
                _reset_peak(serve)
                rss = _rss_kb(serve, "VmRSS")
                n, seconds = client.select(f"SELECT * FROM {TABLE} {sql}")
                assert n == rows, f"{name}: {n} rows, {rows} loaded"
                out[f"{name}_s"].append(seconds)
                out[f"{name}_peak_kb"].append(max(0, _rss_kb(serve, "VmHWM") - rss))
    return out


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench as-of", description=__doc__)
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument(
        "--traffic", type=int, default=600, help="CN transactions after the point (100 keys each)"
    )
    p.add_argument(
        "--hour",
        action="store_true",
        help=f"as many row changes as an hour of the demo's traffic ({HOUR_ROWS:,})",
    )
    p.add_argument(
        "--hot",
        type=int,
        default=0,
        help="the traffic's keys drawn from the first N keys (a hot set, as the demo's 1,000 "
        "accounts); 0: from every key",
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="20,000 rows, 50 transactions, 1 round")
    args = p.parse_args(argv)
    rows, traffic, rounds = (
        (20_000, 50, 1) if args.quick else (args.rows, args.traffic, args.rounds)
    )
    if args.hour:
        traffic = HOUR_ROWS // CHANGE_TXN_KEYS
    r = run(rows, traffic, rounds, args.hot)
    end, old = min(r["end_s"]), min(r["old_s"])
    changes = traffic * CHANGE_TXN_KEYS
    print(
        f"as-of bench: SELECT * of {TABLE}, {rows:,} rows; the old point is before {traffic:,} "
        f"CN transactions of {CHANGE_TXN_KEYS} updates ({r['traffic_s']:.0f} s of traffic, "
        f"{r['changed']:,} keys changed, {r['binlog_after_mb']:.1f} MB of global binlog after "
        f"it); best of {rounds}"
    )
    print(
        f"  the traffic's {changes:,} row changes are {changes / HOUR_ROWS:.1%} of an hour of "
        f"the demo's (~{DEMO_ROWS_PER_S} a second: {HOUR_ROWS:,}), all on the table read "
        f"({f'keys drawn from {args.hot:,}' if args.hot else 'keys drawn from all'}) and made "
        "as fast as the CN goes, not over an hour"
    )
    print(f"  {'read':<22} {'rows/s':>10} {'peak RSS held':>14}")
    print(f"  {'at the end':<22} {rows / end:>10,.0f} {min(r['end_peak_kb']) / 1024:>11.1f} MB")
    print(
        f"  {'as of the old point':<22} {rows / old:>10,.0f} {min(r['old_peak_kb']) / 1024:>11.1f} MB"
    )
    print(
        f"  ratio as of the old point / at the end: {end / old:.2f} {figures.goal('as-of', end / old)}"
    )
    first = r["first_s"]
    print(
        f"  the first read as of the point, which starts the server's index of changed keys and "
        f"scans: {rows / first:,.0f} rows/s ({end / first:.2f} of the best at the end); the "
        f"index built {r['index_s']:.0f} s after it"
    )
    grown = (r["rss_index_kb"] - r["rss_before_kb"]) / 1024
    print(
        f"  the serving process held {r['rss_start_kb'] / 1024:.1f} MB before the traffic, "
        f"{r['rss_before_kb'] / 1024:.1f} MB after it and {r['rss_index_kb'] / 1024:.1f} MB "
        f"once the index was built ({grown:+.1f} MB: the index and what the first read left)"
    )
    return 0
