"""Offline backfill on Spark: a consistent snapshot of the logical tables at any TSO, joined to
the global binlog right after it (docs/backfill.md). `run(config, Options(...), cn)` → Manifest,
with `cn` a `cdc.cn_protocol.client.CnConnector` (the CN the watermarks are written through).

`Options` and `run` load lazily: Spark's Python workers import `backfill.native` and friends,
and must not pay for the driver's modules (the binlog client, the CN: ~1 s of imports)."""

from backfill.errors import BackfillError

__all__ = ["BackfillError", "Options", "run"]


def __getattr__(name: str):
    if name in ("Options", "run"):
        from backfill import job

        return getattr(job, name)
    raise AttributeError(f"module 'backfill' has no attribute {name!r}")
