"""Running the backfill's Python functions as Spark tasks (one item per task), and turning a
Spark failure into a BackfillError that names what was being done."""

from __future__ import annotations

from collections.abc import Callable

from backfill.errors import BackfillError

# Spark tasks per core: items are grouped into at most this many tasks per core. A PySpark task
# costs 0.1-0.5 s of scheduling and worker round trips on the loaded 2-core VM (34 empty tasks:
# 3-18 s), so one task per chunk wasted seconds; two per core still balance uneven items.
TASKS_PER_CORE = 2


def run_tasks(spark, fn: Callable, items: list, what: str) -> list:
    """`fn(item)` for every item, in Spark tasks of consecutive items; → the results in order."""
    if not items:
        return []
    sc = spark.sparkContext
    tasks = min(len(items), TASKS_PER_CORE * sc.defaultParallelism)
    try:
        return sc.parallelize(items, tasks).map(fn).collect()
    except Exception as exc:  # noqa: BLE001 - Py4J: a task failed
        raise spark_failure(exc, what) from None


def spark_failure(exc: Exception, what: str) -> BackfillError:
    """Py4J wraps the task's exception in pages of stack trace; keep its message."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    ours = [ln for ln in lines if "BackfillError: " in ln]  # raised in a Python task
    if ours:
        return BackfillError(ours[-1].split("BackfillError: ", 1)[1][:400])
    causes = [ln for ln in lines if ln.startswith("Caused by:")]
    detail = causes[-1] if causes else next((ln for ln in lines if "Exception" in ln), "")
    if not detail and lines:
        detail = lines[0]
    return BackfillError(f"a Spark job failed while {what}: {detail[:400]}")
