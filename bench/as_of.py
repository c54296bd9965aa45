"""`cdc bench as-of`: `SELECT *` of a logical table through the dumper as of an old point (`AS
OF 'file':pos`, taken before `--traffic` CN transactions changed the table) beside the same read
at the end, interleaved rounds in one run (docs/snapshot-reads.md, "As of a past point"): rows/s
of each and their ratio, the global binlog written after the point, and the memory the old read
held (the serving process's peak RSS above what it had before the reads).

The read as of the point scans the whole binlog after it for the table's changed keys and keeps
one entry per key changed since (its before-image as bytes): what it costs beyond the read at
the end is that scan and that map, both growing with the traffic after the point. The traffic
is the snapshot bench's CN updates (`CHANGE_TXN_KEYS` keys a transaction, keys drawn with
repeats: a key changed twice keeps one entry). The goal (bench/goals.py) is a ratio >= 0.5."""

from __future__ import annotations

import argparse
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


def run(rows: int, traffic: int, rounds: int) -> dict:
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
        rng = random.Random(42)
        keys = [rng.randrange(rows) for _ in range(traffic * CHANGE_TXN_KEYS)]
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
        serve = serve_pid(pipeline.pid)
        out["rss_before_kb"] = _rss_kb(serve, "VmRSS")
        point = f"AS OF '{file}':{pos}"
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
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="20,000 rows, 50 transactions, 1 round")
    args = p.parse_args(argv)
    rows, traffic, rounds = (
        (20_000, 50, 1) if args.quick else (args.rows, args.traffic, args.rounds)
    )
    r = run(rows, traffic, rounds)
    end, old = min(r["end_s"]), min(r["old_s"])
    print(
        f"as-of bench: SELECT * of {TABLE}, {rows:,} rows; the old point is before {traffic:,} "
        f"CN transactions ({r['traffic_s']:.0f} s of traffic, {r['changed']:,} keys changed, "
        f"{r['binlog_after_mb']:.1f} MB of global binlog after it); best of {rounds}"
    )
    print(f"  {'read':<22} {'rows/s':>10} {'peak RSS held':>14}")
    print(f"  {'at the end':<22} {rows / end:>10,.0f} {min(r['end_peak_kb']) / 1024:>11.1f} MB")
    print(
        f"  {'as of the old point':<22} {rows / old:>10,.0f} {min(r['old_peak_kb']) / 1024:>11.1f} MB"
    )
    print(
        f"  ratio as of the old point / at the end: {end / old:.2f} {figures.goal('as-of', end / old)}"
    )
    print(f"  (the serving process held {r['rss_before_kb'] / 1024:.1f} MB before the reads)")
    return 0
