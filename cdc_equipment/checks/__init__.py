"""Checks of what the pipeline delivered, for tests, the demo and operators: `cdc check` (a
downstream equals the logical tables: `downstream.py`) and `cdc verify-binlog` (the global binlog
against the CN's ground-truth log, read by an independent decoder: `verify_binlog.py`).

Exports `run_check` and its `CheckReport`, `read_server` (a binlog read over the replication
protocol), `check_checksums` and `VerifyError`. No runtime stage imports this package.
"""

from cdc_equipment.checks.downstream import CheckReport, run_check
from cdc_equipment.checks.verify_binlog import VerifyError, check_checksums, read_server

__all__ = ["CheckReport", "VerifyError", "check_checksums", "read_server", "run_check"]
