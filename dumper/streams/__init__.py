"""A multi-stream global binlog (`[dumper] streams = N`, docs/streams.md): the merge process's
role (`stream_merge_role`: the pipeline split per stream, fed to one process per stream through
its `StreamOutput`) and the stream process (`stream_process.main`, started by the merge
process, or on another host by `cdc stream serve`'s `listener.py`; not imported here)."""

from dumper.streams.merge_role import stream_merge_role, streams_status, with_streams
from dumper.streams.stream_output import StreamOutput, stream_leader

__all__ = ["StreamOutput", "stream_leader", "stream_merge_role", "streams_status", "with_streams"]
