"""MergeSource: one per DN; reads the physical binlog, sorts branches by commit TSO and strips
XA and private events. Exports nothing yet."""

import cdc  # noqa: E402, F401  (first: it decides between compiled and pure modules, cdc/compiled.py)
