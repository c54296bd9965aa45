"""`python -m bench.replay DN1_BINLOG DN2_BINLOG ...`: DN binlog files (one per DN, DN ids 1, 2,
... in that order) through the pipeline's per-event code, offline, CPU seconds per stage.

Each MergeSource's dump split (`scan_events` of the batch framed as COM_BINLOG_DUMP packets,
every event's CRC checked, the events left in their packets) and `SourceProcessor.feed_packed`
(batches of 2,000 events, as a MergeSource process's dump batch, the DNs in turn), the wire between the processes (`encode_batch` of what it released,
`decode_body` of that frame), the leader's merge (`Merger`) and `TransactionEncoder.encode_into`,
and the writer's pass over what it encoded (`stamp_positions`: log_pos and CRC of every event).
No sockets, no MariaDB: the same code and input give the same instruction count under
`valgrind --tool=callgrind` whatever else the machine does, which a shared 2-core machine's
wall time and CPU seconds do not (run it in two checkouts to compare code; a DN binlog of a
kept `cdc bench pipeline --keep DIR` are in `DIR/raw/dn*/`). It prints the SHA-256 of the worker's
frames and of the output: two checkouts that must give the same bytes print the same.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import time
from pathlib import Path

from cdc.binlog.fastpath import stamp_positions
from cdc.binlog.reader import iter_events
from cdc.protocol.dump_stream import scan_events
from dumper.pipeline.txn_encoder import TransactionEncoder
from merge_joint.merger import Merger
from merge_source.processor import SourceProcessor
from merge_source.scan import packed_count
from merge_source.wire import collapse_watermarks, decode_body, encode_batch

BATCH = 2000  # events per feed_raw call
FRAME_PREFIX = 4  # encode_batch's u32 length before the frame body
STAGES = ("split", "source", "wire_encode", "wire_decode", "merge_encode", "stamp")


def dump_packets(events: list[bytes]) -> bytes:
    """`events` as a DN sends them in a binlog dump: a packet each (3-byte length, sequence id,
    the OK byte 0, the event)."""
    return b"".join((len(e) + 1).to_bytes(3, "little") + b"\0\0" + e for e in events)


def replay(paths: list[Path]) -> dict[str, float]:
    """CPU seconds per stage over the files' events (and the counts)."""
    dns = {
        dn: (path.name, [bytes(e.data) for e in iter_events(path.read_bytes())])
        for dn, path in enumerate(paths, 1)
    }
    clock = time.process_time
    spent = dict.fromkeys(STAGES, 0.0)
    processors = {dn: SourceProcessor(dn) for dn in dns}
    merger, encoder = Merger(dict.fromkeys(dns)), TransactionEncoder(1)
    out = bytearray()
    # Digests of the worker's frames and of the bytes written (outside the clocked stages): two
    # checkouts that must give the same output compare these.
    frames_digest, out_digest = hashlib.sha256(), hashlib.sha256()
    transactions = written = 0
    gc.disable()  # the leader and the MergeSources tune their GC (cdc.memory_tune): not measured here
    for i in range(0, max(len(events) for _, events in dns.values()), BATCH):
        for dn, (name, events) in dns.items():
            packets = dump_packets(events[i : i + BATCH])
            start = clock()
            end, _last = scan_events(packets, 0, True)
            split = clock()
            spent["split"] += split - start
            batch: list = [(packets, 0, end)] if end else []
            if end != len(packets):  # a ROTATE or the like: as the dump client does, as bytes
                batch += events[i + packed_count(packets, 0, end, -1) : i + BATCH]
            items = processors[dn].feed_packed(name, batch)
            fed = clock()
            spent["source"] += fed - split
            if not items:
                continue
            frame = encode_batch(collapse_watermarks(items))
            encoded = clock()
            spent["wire_encode"] += encoded - fed
            frames_digest.update(frame)
            decoded = decode_body(frame[FRAME_PREFIX:])
            start = clock()
            spent["wire_decode"] += start - encoded
            for item in decoded:
                merger.push(item)
            for txn in merger.pop_ready():
                written += encoder.encode_into(txn, out)
                transactions += 1
            encoded = clock()
            spent["merge_encode"] += encoded - start
            if out:
                stamp_positions(out, 4)
                spent["stamp"] += clock() - encoded
                out_digest.update(out)
            del out[:]
    gc.enable()
    events = sum(len(events) for _, events in dns.values())
    digests = {"frames": frames_digest.hexdigest()[:16], "output": out_digest.hexdigest()[:16]}
    return {**spent, "events": events, "transactions": transactions, "written": written, **digests}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__)
    p.add_argument("binlogs", type=Path, nargs="+", help="a DN binlog file per DN (MariaDB)")
    r = replay(p.parse_args(argv).binlogs)
    cpu = sum(r[k] for k in STAGES)
    print(
        f"{r['events']:,} DN events, {r['transactions']:,} transactions, {r['written']:,} events"
        f" written: CPU {cpu:.3f} s ({cpu / r['events'] * 1e6:.2f} us per DN event): dump split"
        f" {r['split']:.3f}, source {r['source']:.3f}, wire encode {r['wire_encode']:.3f}, wire"
        f" decode {r['wire_decode']:.3f}, merge and encode {r['merge_encode']:.3f}, writer's"
        f" stamping {r['stamp']:.3f}; sha256 of the frames {r['frames']}, of the output"
        f" {r['output']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
