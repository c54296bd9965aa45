"""The dumper's pipeline: MergeSources → MergeJoint → BinlogWriter, with the restart protocol
(resume after the last written key, checkpoints saved only up to it). `Leader` takes its
dependencies (a `SourceFactory`, the `PipelineMetadata`, the writer) so that a test can pass
its own."""

from dumper.pipeline.leader import Leader, LeaderError, LeaderStats, leader_status
from dumper.pipeline.metadata import CheckpointTooOld, GmsMetadata, PipelineMetadata
from dumper.pipeline.sources import DnSourceFactory, Source, SourceError, SourceFactory
from dumper.pipeline.term import Takeover, Term

__all__ = [
    "CheckpointTooOld",
    "DnSourceFactory",
    "GmsMetadata",
    "Leader",
    "LeaderError",
    "LeaderStats",
    "PipelineMetadata",
    "Source",
    "SourceError",
    "SourceFactory",
    "Takeover",
    "Term",
    "leader_status",
]
