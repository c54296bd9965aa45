"""MergeSource: one per DN; reads the physical binlog, sorts branches by commit TSO and strips
XA and private events. Runs in-process (`MergeSource`: tests) or in its own process
(`SourceProcess`, forked by a `ForkServer`; its frames to the leader are `frames.proto`). Other packages import only from here."""

import cdc  # noqa: F401  (first: it decides between compiled and pure modules, cdc/compiled.py)
from merge_source.classifier import table_name
from merge_source.fork_server import ForkServer
from merge_source.fragment import Fragment, FragmentKind, Statement, Watermark
from merge_source.renamer import NameMap
from merge_source.source import Batch, MergeSource, SourceSpec
from merge_source.source_process import SourceFailed, SourceProcess, SourceProcessDied, SpillFull
from merge_source.spill import sweep_handoffs

__all__ = [
    "Batch",
    "ForkServer",
    "Fragment",
    "FragmentKind",
    "MergeSource",
    "NameMap",
    "SourceFailed",
    "SourceProcess",
    "SourceProcessDied",
    "SourceSpec",
    "SpillFull",
    "Statement",
    "Watermark",
    "sweep_handoffs",
    "table_name",
]
