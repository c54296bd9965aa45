"""Offline backfill on Spark: a consistent snapshot of the logical tables at any TSO, joined to
the global binlog right after it (docs/backfill.md). `run(config, Options(...))` → Manifest."""

from backfill.errors import BackfillError
from backfill.job import Options, run

__all__ = ["BackfillError", "Options", "run"]
