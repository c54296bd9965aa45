"""`python -m bench.replay DN_BINLOG`: one DN binlog file through the pipeline's per-event code,
offline, CPU seconds per stage.

The MergeSource's `SourceProcessor.feed_raw` (batches of 2,000 events, as a dump batch), the
wire between the processes (`encode_batch` of what it released, `decode_body` of that frame) and
the leader's `TransactionEncoder.encode_into` (each fragment a transaction of its own: no merge).
No sockets, no MariaDB: the same code and input give the same instruction count under
`valgrind --tool=callgrind` whatever else the machine does, which a shared 2-core machine's
wall time and CPU seconds do not (run it in two checkouts to compare code; a DN binlog of a
kept `cdc bench pipeline --keep DIR` is in `DIR/raw/dn1/`).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

from cdc.binlog.reader import iter_events
from dumper.pipeline.txn_encoder import TransactionEncoder
from merge_joint import Transaction
from merge_source.fragment import Fragment
from merge_source.processor import SourceProcessor
from merge_source.wire import collapse_watermarks, decode_body, encode_batch

BATCH = 2000  # events per feed_raw call
FRAME_PREFIX = 4  # encode_batch's u32 length before the frame body


def replay(path: Path) -> dict[str, float]:
    """CPU seconds per stage over the file's events (and the counts)."""
    events = [bytes(e.data) for e in iter_events(path.read_bytes())]
    clock = time.process_time
    spent = dict.fromkeys(("source", "wire_encode", "wire_decode", "encode"), 0.0)
    processor, encoder = SourceProcessor(1), TransactionEncoder(1)
    out = bytearray()
    fragments = written = 0
    gc.disable()  # the leader and the MergeSources tune their GC (cdc.gc_tune): not measured here
    for i in range(0, len(events), BATCH):
        start = clock()
        items = processor.feed_raw(path.name, events[i : i + BATCH])
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
        for f in decoded:
            if type(f) is Fragment:
                txn = Transaction(f.global_key, f.txn_id, f.kind, [f], list(f.statements))
                written += encoder.encode_into(txn, out)
                fragments += 1
        spent["encode"] += clock() - start
        del out[:]
    gc.enable()
    return {**spent, "events": len(events), "fragments": fragments, "written": written}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__)
    p.add_argument("binlog", type=Path, help="a DN binlog file (MariaDB, CN traffic)")
    r = replay(p.parse_args(argv).binlog)
    cpu = sum(r[k] for k in ("source", "wire_encode", "wire_decode", "encode"))
    print(
        f"{r['events']:,} DN events, {r['fragments']:,} fragments, {r['written']:,} events"
        f" written: CPU {cpu:.3f} s ({cpu / r['events'] * 1e6:.2f} us per DN event): source"
        f" {r['source']:.3f}, wire encode {r['wire_encode']:.3f}, wire decode"
        f" {r['wire_decode']:.3f}, encode {r['encode']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
