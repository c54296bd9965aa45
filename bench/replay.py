"""`python -m bench.replay DN1_BINLOG DN2_BINLOG ...`: DN binlog files (one per DN, DN ids 1, 2,
... in that order) through the pipeline's per-event code, offline, CPU seconds per stage.

Each MergeSource's `SourceProcessor.feed_raw` (batches of 2,000 events, as a dump batch, the DNs
in turn), the
wire between the processes (`encode_batch` of what it released, `decode_body` of that frame) and
the leader's merge (`Merger`) and `TransactionEncoder.encode_into`.
No sockets, no MariaDB: the same code and input give the same instruction count under
`valgrind --tool=callgrind` whatever else the machine does, which a shared 2-core machine's
wall time and CPU seconds do not (run it in two checkouts to compare code; a DN binlog of a
kept `cdc bench pipeline --keep DIR` are in `DIR/raw/dn*/`).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

from cdc.binlog.reader import iter_events
from dumper.pipeline.txn_encoder import TransactionEncoder
from merge_joint.merger import Merger
from merge_source.processor import SourceProcessor
from merge_source.wire import collapse_watermarks, decode_body, encode_batch

BATCH = 2000  # events per feed_raw call
FRAME_PREFIX = 4  # encode_batch's u32 length before the frame body


def replay(paths: list[Path]) -> dict[str, float]:
    """CPU seconds per stage over the files' events (and the counts)."""
    dns = {
        dn: (path.name, [bytes(e.data) for e in iter_events(path.read_bytes())])
        for dn, path in enumerate(paths, 1)
    }
    clock = time.process_time
    spent = dict.fromkeys(("source", "wire_encode", "wire_decode", "merge_encode"), 0.0)
    processors = {dn: SourceProcessor(dn) for dn in dns}
    merger, encoder = Merger(dict.fromkeys(dns)), TransactionEncoder(1)
    out = bytearray()
    transactions = written = 0
    gc.disable()  # the leader and the MergeSources tune their GC (cdc.gc_tune): not measured here
    for i in range(0, max(len(events) for _, events in dns.values()), BATCH):
        for dn, (name, events) in dns.items():
            start = clock()
            items = processors[dn].feed_raw(name, events[i : i + BATCH])
            fed = clock()
            spent["source"] += fed - start
            if not items:
                continue
            frame = encode_batch(collapse_watermarks(items))
            encoded = clock()
            spent["wire_encode"] += encoded - fed
            decoded = decode_body(frame[FRAME_PREFIX:])
            start = clock()
            spent["wire_decode"] += start - encoded
            for item in decoded:
                merger.push(item)
            for txn in merger.pop_ready():
                written += encoder.encode_into(txn, out)
                transactions += 1
            spent["merge_encode"] += clock() - start
            del out[:]
    gc.enable()
    events = sum(len(events) for _, events in dns.values())
    return {**spent, "events": events, "transactions": transactions, "written": written}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__)
    p.add_argument("binlogs", type=Path, nargs="+", help="a DN binlog file per DN (MariaDB)")
    r = replay(p.parse_args(argv).binlogs)
    cpu = sum(r[k] for k in ("source", "wire_encode", "wire_decode", "merge_encode"))
    print(
        f"{r['events']:,} DN events, {r['transactions']:,} transactions, {r['written']:,} events"
        f" written: CPU {cpu:.3f} s ({cpu / r['events'] * 1e6:.2f} us per DN event): source"
        f" {r['source']:.3f}, wire encode {r['wire_encode']:.3f}, wire decode"
        f" {r['wire_decode']:.3f}, merge and encode {r['merge_encode']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
