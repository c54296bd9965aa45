"""Dumper: the leader process of the global binlog, in parts wired by `service.py`:

- `dumper.pipeline`: orchestration, MergeSources → MergeJoint → BinlogWriter, with resume and
  checkpoints (`Leader`);
- `dumper.ha`: leader election by lease, fencing, follower copies (`HaNode`);
- `dumper.server`: the MySQL protocol server that serves the binlog files (`serve`);
- `dumper.streams`: with `[dumper] streams` > 1, the merge split into streams, each a process
  with its own writer and server (docs/streams.md).

`run_service`/`serve` (the whole process) load lazily: the server's child process imports
`dumper.server` only, and must not pay for the pipeline's imports."""

import cdc  # noqa: F401  (first: it decides between compiled and pure modules, cdc/compiled.py)

__all__ = ["run_service", "serve"]


def __getattr__(name: str):
    if name in __all__:
        from dumper import service

        return getattr(service, name)
    raise AttributeError(f"module 'dumper' has no attribute {name!r}")
