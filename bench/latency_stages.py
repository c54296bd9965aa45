"""Where commit → dump-client latency goes, from the `cdc.stage_trace` files of one
`cdc bench latency` run: per transaction the time of each stage, and per process the pauses of
its event loop (what its main thread did meanwhile: ran, waited for a CPU, or was blocked).

Stages (all `time.monotonic()`, one clock for every process):
  commit   the CN's commit returned (after XA COMMIT on every DN)
  src      the last of its fragments was released by its DN's MergeSource (the batch holding
           the event that released it was read from the DN)
  lrecv    the leader decoded the last of its fragments from a MergeSource process
  merged   MergeJoint emitted it (every DN's watermark passed its TSO)
  written  the leader's writer appended it and flushed it to the file
  seen     the dump client read its CTS mark
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_S = 0.25  # machine CPU samples
STAGES = ("commit", "src", "lrecv", "merged", "written", "seen")
LAST_OF = {"src", "lrecv"}  # a transaction has a fragment per DN: the last one counts


@dataclass(slots=True)
class Pauses:
    """Event-loop pauses above `stage_trace.LAG_REPORT_S` of one kind of process."""

    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    run_ms: float = 0.0  # the main thread ran meanwhile (Python work, a GC)
    wait_ms: float = 0.0  # runnable, waiting for a CPU (starved)


@dataclass(slots=True)
class StageReport:
    transactions: int = 0
    # (from stage, to stage) -> (p50, p99, max) in ms, over counted transactions
    steps: dict[tuple[str, str], tuple[float, float, float]] = field(default_factory=dict)
    pauses: dict[str, Pauses] = field(default_factory=dict)  # process kind -> pauses
    gc_max_ms: float = 0.0
    fsync_max_ms: float = 0.0
    # Cores busy on the whole machine and in this bench's processes: over the run, and over the
    # samples that overlap the slowest 1 % of transactions (commit → seen).
    busy: float = 0.0
    steal: float = 0.0  # cores stolen by the hypervisor (a VM's vCPUs not running)
    ours: float = 0.0
    busy_slow: float = 0.0
    steal_slow: float = 0.0
    ours_slow: float = 0.0


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def read(directory: Path, since: float, until: float) -> StageReport:
    """The report over transactions committed in [since, until] and pauses in that window."""
    at: dict[str, dict[int, float]] = {s: {} for s in STAGES}
    lags: dict[tuple[str, float], dict[str, int]] = defaultdict(dict)
    report = StageReport()
    for path in directory.glob("*.tsv"):
        kind = path.stem.rsplit("-", 1)[0]
        kind = "source" if kind.startswith("source-") else kind
        with open(path) as f:
            for line in f:
                stage, value, t = line.split("\t")
                v, when = int(value), float(t)
                times = at.get(stage)
                if times is not None:
                    if stage in LAST_OF:
                        times[v] = max(times.get(v, 0.0), when)
                    else:
                        times.setdefault(v, when)
                elif not since <= when <= until:
                    continue
                elif stage.startswith("lag"):
                    lags[(kind, when)][stage] = v
                elif stage.startswith("gc"):
                    report.gc_max_ms = max(report.gc_max_ms, v / 1000)
                elif stage == "fsync":
                    report.fsync_max_ms = max(report.fsync_max_ms, v / 1000)
                elif stage in ("span", "busy", "steal", "ours"):
                    lags[("machine", when)][stage] = v
    counted = [
        tso
        for tso, t in at["commit"].items()
        if since <= t <= until and all(tso in at[s] for s in STAGES)
    ]
    report.transactions = len(counted)
    for a, b in zip(STAGES, STAGES[1:], strict=False):
        deltas = sorted((at[b][tso] - at[a][tso]) * 1000 for tso in counted)
        if deltas:
            report.steps[(a, b)] = (_pct(deltas, 0.5), _pct(deltas, 0.99), deltas[-1])
    samples = sorted((when, lag) for (kind, when), lag in lags.items() if kind == "machine")
    slow = sorted(counted, key=lambda tso: at["seen"][tso] - at["commit"][tso])
    slow = slow[len(slow) * 99 // 100 :]
    spans = [(at["commit"][tso], at["seen"][tso]) for tso in slow]
    _machine(report, samples, spans)
    for (kind, _), lag in lags.items():
        if kind == "machine":
            continue
        p = report.pauses.setdefault(kind, Pauses())
        ms = lag.get("lag", 0) / 1000
        p.count += 1
        p.total_ms += ms
        p.max_ms = max(p.max_ms, ms)
        p.run_ms += lag.get("lag_run", 0) / 1000
        p.wait_ms += lag.get("lag_wait", 0) / 1000
    return report


def _machine(report: StageReport, samples, spans) -> None:
    """Mean cores busy / stolen / ours over all samples and over those overlapping a slow
    transaction (each sample covers the `span` ms before its time)."""

    def mean(chosen) -> tuple[float, float, float]:
        span = sum(v.get("span", 0) for _, v in chosen)
        if not span:
            return 0.0, 0.0, 0.0
        return tuple(sum(v.get(k, 0) for _, v in chosen) / span for k in ("busy", "steal", "ours"))

    report.busy, report.steal, report.ours = mean(samples)
    overlapping = [
        (t, v)
        for t, v in samples
        if any(a < t and t - v.get("span", 0) / 1000 < b for a, b in spans)
    ]
    report.busy_slow, report.steal_slow, report.ours_slow = mean(overlapping)


class MachineSampler(threading.Thread):
    """Every SAMPLE_S: CPU ms the whole machine spent (/proc/stat, all but idle and iowait)
    and what `ours()` says this bench's processes spent (cumulative seconds), into the trace
    directory: was a slow stretch our own load or someone else's?"""

    def __init__(self, directory: Path, ours: Callable[[], float]):
        super().__init__(daemon=True, name="machine-sampler")
        self._path = directory / f"machine-{os.getpid()}.tsv"
        self._ours = ours
        self._done = threading.Event()

    @staticmethod
    def _cpu_ms() -> tuple[float, float]:
        """(busy, stolen) CPU ms of the machine so far: busy is user..softirq (not idle or
        iowait), stolen is steal (our vCPUs not running: the hypervisor gave them away)."""
        with open("/proc/stat") as f:
            user, nice, system, idle, iowait, irq, softirq, steal = map(
                int, f.readline().split()[1:9]
            )
        tick = 1000 / os.sysconf("SC_CLK_TCK")
        return (user + nice + system + irq + softirq) * tick, steal * tick

    def _ours_s(self) -> float:
        try:
            self._last = self._ours()
        except OSError:  # a process ended between listing and reading it
            pass
        return self._last

    def run(self) -> None:
        self._last = 0.0
        then, (busy, stolen), ours = time.monotonic(), self._cpu_ms(), self._ours_s()
        with open(self._path, "a") as out:
            while not self._done.wait(SAMPLE_S):
                now, (b, st), o = time.monotonic(), self._cpu_ms(), self._ours_s()
                rows = (("span", (now - then) * 1000), ("busy", b - busy), ("steal", st - stolen))
                rows += (("ours", (o - ours) * 1000),)
                out.write("".join(f"{k}\t{int(v)}\t{now:.6f}\n" for k, v in rows))
                then, busy, stolen, ours = now, b, st, o

    def stop(self) -> None:
        self._done.set()
        self.join(5)


def describe(report: StageReport, seconds: float) -> list[str]:
    """Lines for the bench's output."""
    if not report.transactions:
        return ["  per stage: no traced transactions"]
    out = [f"  per stage (ms; p50 / p99 / max over {report.transactions:,} transactions):"]
    for (a, b), (p50, p99, top) in report.steps.items():
        out.append(f"    {a:>7} -> {b:<7} {p50:7.1f} {p99:7.1f} {top:7.1f}")
    parts = []
    for kind, p in sorted(report.pauses.items()):
        share = min(100.0, 100 * p.wait_ms / p.total_ms) if p.total_ms else 0.0
        parts.append(
            f"{kind} {p.count} ({p.total_ms / seconds / 10:.1f}% of the time, max"
            f" {p.max_ms:.0f} ms, {share:.0f}% waiting for a CPU)"
        )
    out.append("  event-loop pauses > 20 ms: " + ("; ".join(parts) or "none"))
    out.append(
        f"  longest GC pause {report.gc_max_ms:.0f} ms, longest binlog fsync"
        f" {report.fsync_max_ms:.0f} ms"
    )
    cores = os.cpu_count() or 2
    out.append(
        f"  machine ({cores} cores): busy {report.busy:.2f}, of it this bench"
        f" {report.ours:.2f}, stolen by the hypervisor {report.steal:.2f}; while the slowest"
        f" 1 % were in flight: busy {report.busy_slow:.2f}, ours {report.ours_slow:.2f},"
        f" stolen {report.steal_slow:.2f}"
    )
    return out


def trace_dir(work: Path) -> Path:
    """`$CDC_STAGE_TRACE` if set (kept after the run), else a directory of the run's own."""
    path = Path(os.environ.get("CDC_STAGE_TRACE") or work / "stages")
    path.mkdir(parents=True, exist_ok=True)
    return path
