"""Feed one huge held branch through a SourceProcessor and report the peak memory growth.

    .venv/bin/python -m tests.merge_source.spill_probe --mb 96 --spill-bytes 8388608

Run in its own process by `test_spill.py` so that nothing else moves the high-water mark. The
stream is the recorded "reversed" cases (txn 3 prepared, txn 4 prepared, txn 4's record and
commit, then txn 3's): txn 4's prepare group is inflated to `--mb` MB by synthesized 8 KB
WRITE_ROWS events (the size MariaDB cuts a big INSERT into), generated lazily, so the held branch
waits behind txn 3 while being huge. Prints one JSON line: the peak RSS (VmHWM) before and after,
a digest of everything emitted (keys, traces, event bytes streamed with `iter_events`), and how
many groups were spilled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import time
from collections.abc import Iterator

from cdc.protocol import DnEvent
from merge_source.classifier import FL_PREPARED_XA, cn_txn_id, gtid_xid
from merge_source.fragment import Fragment
from merge_source.group import GTID_FLAGS2_OFFSET
from merge_source.processor import SourceProcessor
from merge_source.renamer import NameMap
from tests.merge_source.record_fixtures import EXPECTED_FILE, load_events

ROWS_EVENT_BYTES = 8192
WRITE_ROWS = 23
GTID = 162


def peak_rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def recorded_case_events() -> tuple[list[tuple[str, int, bytes]], dict]:
    """The FDE, then every event of the cases `reversed_first` and `reversed_second`."""
    expected = json.loads(EXPECTED_FILE.read_text())
    names = [c["name"] for c in expected["cases"]]
    first = names.index("reversed_first")
    start = tuple(expected["cases"][first - 1]["end"])
    end = tuple(expected["cases"][names.index("reversed_second")]["end"])
    events = list(load_events())
    fde = next(e for e in events if e[2][4] == 15)
    return [fde] + [e for e in events if start <= (e[0], e[1]) < end], expected


def inflated(total_bytes: int) -> Iterator[DnEvent]:
    """The recorded events, txn 4's prepare group grown to `total_bytes`; positions renumbered."""
    events, _ = recorded_case_events()
    pos = 4
    in_txn4 = False
    for i, (file, _pos, data) in enumerate(events):
        if i == 0:
            yield DnEvent(file, 4, data)
            pos = 256  # after the FDE and a GTID list, roughly as in a real file
            continue
        if data[4] == GTID:
            in_txn4 = False
            if data[GTID_FLAGS2_OFFSET] & FL_PREPARED_XA:
                fmt, gtrid, _ = gtid_xid(data)
                in_txn4 = cn_txn_id(fmt, gtrid) == 4
        yield DnEvent(file, pos, data)
        pos += len(data)
        if in_txn4 and data[4] == WRITE_ROWS:
            # Copies of this rows event padded to 8 KB (never decoded: user rows stay raw).
            head = data[:-4]
            pad = ROWS_EVENT_BYTES - len(head) - 4
            for n in range(max(0, total_bytes // ROWS_EVENT_BYTES)):
                body = bytearray(head) + struct.pack("<I", n) * (pad // 4) + b"\0\0\0\0"
                struct.pack_into("<I", body, 9, len(body))
                yield DnEvent(file, pos, bytes(body))
                pos += len(body)


def batched(events: Iterator[DnEvent], n: int) -> Iterator[list[DnEvent]]:
    batch: list[DnEvent] = []
    for e in events:
        batch.append(e)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=int, default=96)
    p.add_argument("--spill-bytes", type=int, default=8 << 20)
    p.add_argument("--spill-dir", default=None)
    args = p.parse_args(argv)
    _, expected = recorded_case_events()
    processor = SourceProcessor(
        expected["dn_id"],
        names=NameMap.from_topology(expected["dn_id"], expected["topology"]),
        spill_bytes=args.spill_bytes,
        spill_dir=args.spill_dir,
    )
    digest = hashlib.sha256()
    fragments = spilled = 0
    before = peak_rss_kb()
    started = time.perf_counter()
    for batch in batched(inflated(args.mb << 20), 256):  # dump-client-sized batches
        for out in processor.feed_batch(batch):
            if isinstance(out, Fragment):
                fragments += 1
                spilled += out.spilled
                digest.update(repr((out.key, out.txn_id, out.participants)).encode())
                for st in out.statements:
                    digest.update(repr(st.trace_id).encode())
                    for e in st.iter_events():
                        digest.update(e)
            else:
                digest.update(repr(out.key).encode())
            del out  # a fragment is not kept once consumed, as downstream does
    elapsed = time.perf_counter() - started
    after = peak_rss_kb()
    report = {
        "mb": args.mb,
        "spill_bytes": args.spill_bytes,
        "peak_before_kb": before,
        "peak_after_kb": after,
        "growth_kb": after - before,
        "digest": digest.hexdigest(),
        "fragments": fragments,
        "spilled_fragments": spilled,
        "spilled_groups": processor.assembler.spilled_groups,
        "seconds": round(elapsed, 2),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
