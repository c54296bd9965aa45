"""Running the backfill's Python functions as Spark tasks (one item per task), and turning a
Spark failure into a BackfillError that names what was being done."""

from __future__ import annotations

from collections.abc import Callable

from backfill.errors import BackfillError


def run_tasks(spark, fn: Callable, items: list, what: str) -> list:
    """`fn(item)` for every item, one Spark task each, in any order; → the results in order."""
    if not items:
        return []
    try:
        return spark.sparkContext.parallelize(items, len(items)).map(fn).collect()
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
