"""The dumper's pipeline: MergeSources → MergeJoint → an `Output` (the binlog files, or a
multi-stream binlog's stream processes), with the restart protocol (resume after the last
written key, checkpoints saved only up to it). `Leader` takes its dependencies (a
`SourceFactory`, the `PipelineMetadata`, the output or the writer) so that a test can pass
its own."""

from dumper.pipeline.leader import Leader
from dumper.pipeline.metadata import CheckpointTooOld, GmsMetadata, PipelineMetadata
from dumper.pipeline.output import LeaderError, Output
from dumper.pipeline.sources import DnSourceFactory, Source, SourceError, SourceFactory
from dumper.pipeline.status import LeaderStats, leader_status, write_status
from dumper.pipeline.term import Takeover, Term

__all__ = [
    "CheckpointTooOld",
    "DnSourceFactory",
    "GmsMetadata",
    "Leader",
    "LeaderError",
    "LeaderStats",
    "Output",
    "PipelineMetadata",
    "Source",
    "SourceError",
    "SourceFactory",
    "Takeover",
    "Term",
    "leader_status",
    "write_status",
]
