"""The goal of every figure the benchmarks print, in one table (issue 43, "the goal now"), and
what a bench run measured beside them.

A bench prints a figure with `Figures.goal(name, value)`, which returns the figure's verdict
(`(goal >= 1.0: not met)`) from `GOALS` and keeps the figure; `cdc bench all` hands every bench
a `Figures` of its own and prints them all at the end (`summary`): each figure beside its goal,
met or not, and the benches that failed. Run on their own, the benches print the same verdicts.

A figure is "not measured" when the run did not meet the goal's condition (the latency bench's
CN did not reach 2,000 TPS, a smaller transaction than the 1 GB the RSS goal is for): the value
is shown, but it says nothing of the goal."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# The pipeline's CPU per DN event on 2026-11-29 (issue 43: 3.2-4.2 us in three runs of
# `cdc bench pipeline --repeat 3`; the middle of that range): its goal is half of it.
PIPELINE_CPU_US_BEFORE = 3.7
# "Flat as streams grow": CPU time of the merge moves by a few percent from run to run on this
# machine, so the most streams' CPU per event may be up to 10 % above one stream's.
STREAMS_TOLERANCE = 1.10


@dataclass(frozen=True, slots=True)
class Goal:
    """A bound on one figure: at least `bound` (a ratio against a baseline of the same run), or
    at most it (`ceiling`: a time, a size, CPU per event)."""

    figure: str  # what the figure is, as the summary names it
    bound: float
    ceiling: bool = False
    unit: str = ""
    digits: int = 2  # decimals the figure is shown with

    def met(self, value: float) -> bool:
        return value <= self.bound if self.ceiling else value >= self.bound

    def show(self, value: float) -> str:
        return f"{value:.{self.digits}f}{self.unit}"

    def __str__(self) -> str:
        return f"{'<=' if self.ceiling else '>='} {self.bound:g}{self.unit}"


GOALS: dict[str, Goal] = {
    "writer": Goal("writer given stamped bytes / a plain buffered write", 0.5),
    "dumper": Goal("dumper / mariadbd, one binlog file", 0.8),
    "fanout": Goal("dumper / mariadbd MB/s", 0.9),  # at every width
    "merge-source": Goal("one MergeSource / raw dump of its DN", 0.3),
    "pipeline": Goal("catch-up speed / raw dump of the DN binlogs", 1.0),
    "pipeline-cpu": Goal(
        "CPU per DN event (0.5x the 3.7 us before issue 43)",
        0.5 * PIPELINE_CPU_US_BEFORE,
        ceiling=True,
        unit=" us",
    ),
    "backfill": Goal("backfill / plain dump, end to end", 0.9),
    "snapshot": Goal("read through the dumper / the shards directly", 0.5),
    "snapshot-changed": Goal(
        "keys changed after the read's position, by its end", 5.0, unit=" %", digits=1
    ),
    "as-of": Goal("read as of an old point / read at the end", 0.5),
    "snapshot-isolation": Goal("binlog growth with / without table readers", 0.95),
    "hostile": Goal("binlog growth with / without hostile clients", 0.95),
    "latency": Goal(
        "p99 commit -> seen at 2,000 TPS, 200 ms heartbeats",
        100,
        ceiling=True,
        unit=" ms",
        digits=0,
    ),
    "scale": Goal("catch-up, 8 DNs / 2 DNs", 0.8),
    "streams": Goal(
        "merge CPU per DN event, most streams / 1 stream", STREAMS_TOLERANCE, ceiling=True
    ),
    "big-txn": Goal(
        "peak memory (PSS) of the pipeline, one 1 GB transaction",
        300,
        ceiling=True,
        unit=" MB",
        digits=0,
    ),
}


@dataclass(frozen=True, slots=True)
class Figure:
    goal: Goal
    value: float
    at: str = ""  # which of the bench's figures of that goal: a width, a variant
    unmeasured: str = ""  # why the run says nothing of the goal

    @property
    def status(self) -> str:
        if self.unmeasured:
            return "not measured"
        return "met" if self.goal.met(self.value) else "not met"

    def verdict(self) -> str:
        why = f", {self.unmeasured}" if self.unmeasured else ""
        return f"(goal {self.goal}: {self.status}{why})"

    def label(self) -> str:
        return f"{self.goal.figure}, {self.at}" if self.at else self.goal.figure


@dataclass(slots=True)
class Figures:
    """What one bench run measured against a goal, in the order it printed them."""

    measured: list[Figure] = field(default_factory=list)

    def goal(self, name: str, value: float, at: str = "", unmeasured: str = "") -> str:
        """The verdict on `value` against goal `name`, to print beside the figure; kept for the
        summary."""
        figure = Figure(GOALS[name], value, at, unmeasured)
        self.measured.append(figure)
        return figure.verdict()


@dataclass(frozen=True, slots=True)
class BenchRun:
    """One bench of `cdc bench all`: its title, what it measured, whether it failed."""

    title: str
    figures: Figures
    failed: bool = False


def summary(runs: list[BenchRun]) -> str:
    """Every bench's figures beside their goals, met or not; a failed bench says so (with the
    figures it printed before it failed), a bench without a goal too."""
    width = max([len(f.label()) for r in runs for f in r.figures.measured] + [20])
    lines = [f"  {'figure':<{width + 2}} {'measured':>10}  {'goal':<11} "]
    statuses: Counter[str] = Counter()
    for run in runs:
        if run.failed:
            lines.append(f"  {run.title}: FAILED")
        elif not run.figures.measured:
            lines.append(f"  {run.title}: no goal")
        else:
            lines.append(f"  {run.title}")
        for f in run.figures.measured:
            statuses[f.status] += 1
            note = f" ({f.unmeasured})" if f.unmeasured else ""
            lines.append(
                f"    {f.label():<{width}} {f.goal.show(f.value):>10}  {str(f.goal):<11} "
                f"{f.status}{note}"
            )
    failed = sum(r.failed for r in runs)
    lines.append(
        f"  {sum(statuses.values())} figures: {statuses['met']} met, {statuses['not met']} not met,"
        f" {statuses['not measured']} not measured; {failed} of {len(runs)} benches failed"
    )
    return "\n".join(lines)
