"""`python -m bench.streams_replay --streams N DN1_BINLOG DN2_BINLOG ...`: the merge process's
per-stream work over recorded DN binlogs, offline: what a multi-stream merge does after
MergeJoint (docs/streams.md), against what the one-stream merge does there.

The DN binlogs go through the sources and MergeJoint first (`bench.replay`'s stages, the same
for every stream count, in batches as the live leader pops them); then, measured:

- `--streams 1`: each merged batch through the one-stream merge's output (`BinlogOutput`:
  the encoder and the `BinlogWriter`'s stamping, CRC and file write; no fsync): it writes its
  binlog itself.
- `--streams N`: each batch through `StreamOutput` (the split, N encoders, each stream's frame)
  into a `FrameSink` in place of the stream processes: the frames are counted, not written
  (the kernel's copy into a pipe is not here), with a checkpoint round every `--round-every`
  batches. `--batch-txns K` cuts the merged transactions into batches of K (a live rate's
  batches are a transaction or two; a catch-up's hundreds).
- `--streams 0`: nothing after MergeJoint (the instructions every count shares).

No sockets, no processes, no stream processes' CPU: under `valgrind --tool=callgrind` the
instruction count is the same whatever else the machine runs, which the live bench's CPU seconds
(`cdc bench streams`) are not on a shared 2-core machine. The count at N minus the count at 0 is
the merge's output side at N streams; flat as streams grow means that difference does not grow
with N.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path

from bench.replay import BATCH, FRAME_PREFIX, dump_packets
from binlog_writer import MysqlGtids
from cdc.binlog.gtid import sid_of
from cdc.binlog.reader import iter_events
from cdc.config import Config
from cdc.pauses import Pauses
from cdc.protocol.dump_stream import scan_events
from dumper.pipeline import LeaderStats
from dumper.pipeline.binlog_output import BinlogOutput
from dumper.streams import StreamOutput
from dumper.streams.wire import ToStream
from merge_joint.merger import Merger
from merge_source.processor import SourceProcessor
from merge_source.scan import packed_count
from merge_source.wire import collapse_watermarks, decode_body, encode_batch

SERVER_ID = 1
CLUSTER_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
SID = sid_of(CLUSTER_UUID)


def merged_batches(paths: list[Path]) -> tuple[int, list[list]]:
    """(DN events, the merged transactions in the batches MergeJoint popped them in)."""
    dns = {
        dn: (path.name, [bytes(e.data) for e in iter_events(path.read_bytes())])
        for dn, path in enumerate(paths, 1)
    }
    processors = {dn: SourceProcessor(dn) for dn in dns}
    merger = Merger(dict.fromkeys(dns))
    batches: list[list] = []
    for i in range(0, max(len(events) for _, events in dns.values()), BATCH):
        for dn, (name, events) in dns.items():
            packets = dump_packets(events[i : i + BATCH])
            end, _last = scan_events(packets, 0, True)
            batch: list = [(packets, 0, end)] if end else []
            if end != len(packets):
                batch += events[i + packed_count(packets, 0, end, -1) : i + BATCH]
            items = processors[dn].feed_packed(name, batch)
            if not items:
                continue
            frame = encode_batch(collapse_watermarks(items))
            for item in decode_body(frame[FRAME_PREFIX:]):
                merger.push(item)
            ready = list(merger.pop_ready())
            if ready:
                batches.append(ready)
    return sum(len(events) for _, events in dns.values()), batches


class FrameSink:
    """In place of a `StreamSet`: takes each stream's frames as a stream process's pipe would
    (the transport's write), counting them; no process, no pipe, no kernel copy (nor any
    other work of its own: what it costs is counted as the merge's)."""

    def __init__(self, streams: int):
        self.frames = [0] * streams

    def send(self, stream: int, message: ToStream) -> None:
        self.frames[stream] += 1

    def send_pieces(self, stream: int, pieces) -> None:
        self.frames[stream] += 1

    def send_all(self, message: ToStream) -> None:
        for i in range(len(self.frames)):
            self.send(i, message)

    def check(self) -> None:
        pass

    async def drain(self, streams=None) -> None:
        pass

    async def sync(self) -> None:
        pass


def config(directory: Path, streams: int) -> Config:
    cfg = Config()
    cfg.dumper.binlog_dir = str(directory / "binlog")
    cfg.dumper.streams = streams
    cfg.pipeline.fsync = "never"
    return cfg


async def run_output(batches: list[list], streams: int, directory: Path, round_every: int):
    """The merged `batches` through the merge's real output (`BinlogOutput` for one stream,
    `StreamOutput` into a `FrameSink` for more), a checkpoint round every `round_every`
    batches: (bytes encoded, frames per stream)."""
    cfg = config(directory, streams)
    stats = LeaderStats()
    if streams == 1:
        output = BinlogOutput(cfg, Pauses(), gtids=MysqlGtids(SID))
    else:
        output = StreamOutput(cfg, directory / "state", CLUSTER_UUID, MysqlGtids(SID), Pauses())
        output.streams = sink = FrameSink(streams)  # type: ignore[assignment]
        output.ends = [None] * streams
    for n, ready in enumerate(batches, 1):
        await output.write(ready, stats, None)
        if n % round_every == 0:
            output.checkpoint_round(ready[-1].tso)
            await output.sync(stats)
    if streams == 1:
        output.writer.close()
        return stats.bytes, []
    return stats.bytes, sink.frames


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.streams_replay", description=__doc__)
    p.add_argument("binlogs", type=Path, nargs="+", help="a DN binlog file per DN (MariaDB)")
    p.add_argument("--streams", type=int, default=1, help="0: MergeJoint only (default 1)")
    p.add_argument(
        "--batch-txns",
        type=int,
        default=0,
        help="transactions per merged batch (default 0: as MergeJoint popped them, a catch-up's"
        " hundreds; 1 or 2 is a live rate's)",
    )
    p.add_argument(
        "--round-every", type=int, default=100, help="batches per checkpoint round (default 100)"
    )
    args = p.parse_args(argv)
    gc.disable()  # (as bench.replay: the processes tune their GC; not measured here)
    events, batches = merged_batches(args.binlogs)
    if args.batch_txns:
        txns = [t for b in batches for t in b]
        batches = [txns[i : i + args.batch_txns] for i in range(0, len(txns), args.batch_txns)]
    start = time.process_time()
    written, frames = 0, []
    with tempfile.TemporaryDirectory(prefix="cdc-streams-replay-") as tmp:
        if args.streams:
            written, frames = asyncio.run(
                run_output(batches, args.streams, Path(tmp), args.round_every)
            )
    cpu = time.process_time() - start
    txns = sum(len(b) for b in batches)
    print(
        f"{events:,} DN events, {txns:,} transactions in {len(batches):,} batches;"
        f" {args.streams} stream(s): {written:,} bytes out, frames {frames}, CPU {cpu:.3f} s"
        f" ({cpu / events * 1e6:.3f} us per DN event) after MergeJoint"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
