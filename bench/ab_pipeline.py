"""`python -m bench.ab_pipeline BASE NEW --keep DIR`: `cdc bench pipeline` of two checkouts,
alternately, on the same DN binlogs (A/B across code).

Each checkout runs `cdc` from its own code and compiled modules in turn (its `.venv`'s Python, or
this one's for a git worktree without one, with PYTHONPATH set to the checkout either way, so a
shared virtualenv's editable install does not decide), `--rounds` times each, BASE first; the first run generates the traffic into `--keep`, every later one re-measures
it. On a shared machine one run says little: alternating spreads the other load over both sides,
and the ranges and the ratio of the medians say how far they differ. Prints, per side, the
catch-up time and the CPU per DN event (leader + MergeSource processes + their fork server).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

CATCH_UP = re.compile(r"pipeline catch-up\s+([\d.]+) s")
PER_EVENT = re.compile(r"\(([\d.]+) us per DN event\)")
PROCESSES = re.compile(r"CPU: leader ([\d.]+) s, MergeSource processes ([\d.]+) s")


def run(checkout: Path, keep: Path, events: int, dns: int) -> tuple[float, float, str]:
    """One `cdc bench pipeline --keep` of `checkout`: (catch-up seconds, CPU us per DN event,
    the CPU seconds of the leader and of the MergeSource processes as printed)."""
    # The kept cluster's cdc.toml is written by whichever side ran last: each side writes its
    # own, since the two checkouts' config keys may differ (a key renamed in between).
    (keep / "cluster" / "cdc.toml").unlink(missing_ok=True)
    venv = checkout / ".venv" / "bin" / "python"
    python = str(venv) if venv.exists() else sys.executable
    # The CLI's package by the checkout's layout: `cli` before the equipment was gathered (issue 40).
    cli = "cdc_cli" if (checkout / "cdc_cli").is_dir() else "cli"
    cmd = [python, "-m", f"{cli}.main", "bench", "pipeline", "--keep", str(keep)]
    cmd += ["--events", str(events), "--dns", str(dns)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
    catch_up, per_event = CATCH_UP.search(out.stdout), PER_EVENT.search(out.stdout)
    processes = PROCESSES.search(out.stdout)
    if out.returncode != 0 or catch_up is None or per_event is None or processes is None:
        sys.exit(
            f"{' '.join(cmd)} (in {checkout}) failed:\n{out.stdout[-2000:]}{out.stderr[-3000:]}"
        )
    where = f"leader {processes[1]} s, MergeSource processes {processes[2]} s"
    return float(catch_up[1]), float(per_event[1]), where


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ab_pipeline", description=__doc__)
    p.add_argument("base", type=Path, help="the checkout measured first (e.g. main's)")
    p.add_argument("new", type=Path, help="the checkout compared with it")
    p.add_argument("--keep", type=Path, required=True, help="the kept cluster and its traffic")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--events", type=int, default=1_000_000, help="DN events, if generated")
    p.add_argument("--dns", type=int, default=3)
    args = p.parse_args(argv)
    sides = {"base": args.base.absolute(), "new": args.new.absolute()}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for n in range(args.rounds):
        for name, checkout in sides.items():
            catch_up, per_event, where = run(checkout, args.keep.absolute(), args.events, args.dns)
            results[name].append((catch_up, per_event))
            print(
                f"round {n + 1} {name:4}: catch-up {catch_up:6.2f} s,"
                f" CPU {per_event:5.2f} us per DN event ({where})",
                flush=True,
            )
    median = {}
    for name, runs in results.items():
        times, cpus = [r[0] for r in runs], [r[1] for r in runs]
        median[name] = (statistics.median(times), statistics.median(cpus))
        print(
            f"{name:4} ({sides[name]}): catch-up {min(times):.2f}-{max(times):.2f} s"
            f" (median {median[name][0]:.2f}), CPU {min(cpus):.2f}-{max(cpus):.2f} us per DN"
            f" event (median {median[name][1]:.2f})"
        )
    print(
        f"new / base, medians: catch-up speed {median['base'][0] / median['new'][0]:.3f}x,"
        f" CPU per DN event {median['new'][1] / median['base'][1]:.3f}x"
    )
    # Each round's two runs are neighbours in time, so their ratio cancels most of a load that
    # drifts over the whole A/B (the medians above do not).
    pairs = list(zip(results["base"], results["new"], strict=True))
    print(
        f"new / base, median of the rounds' ratios: catch-up speed"
        f" {statistics.median(b[0] / n[0] for b, n in pairs):.3f}x, CPU per DN event"
        f" {statistics.median(n[1] / b[1] for b, n in pairs):.3f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
