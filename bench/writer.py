"""`cdc bench writer`: write N generated transactions with BinlogWriter and, in the same run,
the same bytes with a plain buffered file write; print events/s, MB/s and their ratio."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.goals import Figures
from binlog_writer import BinlogWriter, FsyncPolicy, MysqlGtids
from cdc.binlog.constants import GTID_EVENT
from cdc.binlog.constants import ColumnType as T
from cdc.binlog.events import (
    MysqlGtidEvent,
    QueryEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
    cts_mark,
    encode_event,
)
from cdc.binlog.fastpath import stamp_positions
from cdc.binlog.table_map import Column

_COLS = [
    Column(T.LONG, nullable=False, name=b"id"),
    Column(T.LONGLONG, name=b"n"),
    Column(T.VARCHAR, 1024, name=b"payload", collation=45),
]


def make_transactions(
    n: int, *, rows_per_txn: int = 1, row_bytes: int = 100, templates: int = 64
) -> list[list[bytes]]:
    """N transactions of raw events (BEGIN, TABLE_MAP, WRITE_ROWS v2, XID, CTS mark). A few
    distinct templates are reused: the writer does not look at row contents."""
    tm = TableMapEvent.from_columns(1, "bench", "t", _COLS, primary_key=[0])
    begin = encode_event(QueryEvent(b"BEGIN", db=b"bench"))
    tm_raw = encode_event(tm)
    made = []
    for k in range(min(n, templates)):
        rows = [
            [k * rows_per_txn + i, i, bytes([65 + (k % 26)]) * row_bytes]
            for i in range(rows_per_txn)
        ]
        made.append(
            [
                begin,
                tm_raw,
                encode_event(RowsEvent.from_rows(30, 1, _COLS, rows)),
                encode_event(XidEvent(k)),
                encode_event(cts_mark(1 << 40 | k)),
            ]
        )
    return [made[i % len(made)] for i in range(n)]


def _rate(events: int, nbytes: int, seconds: float) -> dict:
    return {
        "seconds": round(seconds, 4),
        "events_per_s": round(events / seconds),
        "mb_per_s": round(nbytes / seconds / 1e6, 1),
    }


def run_bench(
    n_txns: int = 100_000,
    *,
    rows_per_txn: int = 1,
    row_bytes: int = 100,
    fsync: str = "never",
    directory: str | None = None,
    max_file_size: int = 1 << 30,
) -> dict:
    """Run the writer bench once; returns figures for the writer (log_pos+CRC restamped per
    event), the writer fed pre-stamped bytes (`prepare`/`append_stamped`), and a plain
    buffered write of the same event bytes, plus the ratios writer/plain."""
    txns = make_transactions(n_txns, rows_per_txn=rows_per_txn, row_bytes=row_bytes)
    n_events = sum(len(t) for t in txns)
    n_bytes = sum(len(e) for t in txns for e in t)
    with tempfile.TemporaryDirectory(prefix="cdc-bench-", dir=directory) as tmp:
        root = Path(tmp)
        policy = FsyncPolicy.parse(fsync)

        # Plain buffered write of the same bytes, event by event.
        t0 = time.perf_counter()
        with open(root / "plain.bin", "wb") as f:
            write = f.write
            for txn in txns:
                for ev in txn:
                    write(ev)
        plain = time.perf_counter() - t0

        t0 = time.perf_counter()
        with BinlogWriter(root / "w", fsync=policy, max_file_size=max_file_size) as w:
            append = w.append_transaction
            for txn in txns:
                append(txn)
        writer = time.perf_counter() - t0

        # The pipeline's intended fast mode: the dumper stamps log_pos/CRC in the rewrite pass
        # it does anyway (table_id/server_id), so the writer only validates and writes. The
        # stamp pass is timed apart and reported as the caller's cost.
        joined = [b"".join(t) for t in txns]
        clock = time.perf_counter
        stamp_time = 0.0
        t0 = clock()
        with BinlogWriter(root / "s", fsync=policy, max_file_size=max_file_size) as w:
            for raw in joined:
                buf = bytearray(raw)
                start = w.prepare(len(buf))
                s0 = clock()
                stamp_positions(buf, start)
                stamp_time += clock() - s0
                w.append_stamped(buf)
        stamped = clock() - t0 - stamp_time

        # The leader's path (`append_batch` of encoded batches), without GTIDs and with them:
        # each transaction then starts with a GTID event the writer numbers (what GTIDs cost).
        plain_batch = _batched(root / "b", joined, policy, max_file_size, None)
        gtid_batch = _batched(root / "g", joined, policy, max_file_size, bytes(range(16)))

    result = {
        "transactions": n_txns,
        "events": n_events,
        "bytes": n_bytes,
        "fsync": fsync,
        "plain_buffered_write": _rate(n_events, n_bytes, plain),
        "writer": _rate(n_events, n_bytes, writer),
        "writer_given_stamped": _rate(n_events, n_bytes, stamped),
        "caller_stamp_pass": _rate(n_events, n_bytes, stamp_time),
        "writer_batches": _rate(n_events, n_bytes, plain_batch),
        "writer_batches_gtids": _rate(n_events + n_txns, n_bytes + n_txns * len(GTID), gtid_batch),
    }
    result["ratio_writer_vs_plain"] = round(plain / writer, 3)
    result["ratio_stamped_vs_plain"] = round(plain / stamped, 3)
    result["ratio_gtids_vs_batches"] = round(plain_batch / gtid_batch, 3)
    return result


GTID = encode_event(MysqlGtidEvent(GTID_EVENT, 1, bytes(16), 0, 2))  # the encoder's
BATCH = 100  # transactions per append_batch, about what the leader gathers under load


def _batched(directory: Path, joined: list[bytes], policy, max_file_size: int, sid) -> float:
    """Seconds to write `joined` in batches of BATCH (with a GTID event first in each
    transaction when `sid` is given, numbered by the writer)."""
    elapsed = 0.0
    gtids = MysqlGtids(sid) if sid is not None else None
    with BinlogWriter(directory, fsync=policy, max_file_size=max_file_size, gtids=gtids) as w:
        for i in range(0, len(joined), BATCH):
            buf, ends, gtid_at = bytearray(), [], []
            for raw in joined[i : i + BATCH]:  # building the batch is the encoder's cost
                if sid is not None:
                    gtid_at.append(len(buf))
                    buf += GTID
                buf += raw
                ends.append(len(buf))
            t0 = time.perf_counter()
            w.append_batch(buf, ends, gtid_at if sid is not None else None)
            elapsed += time.perf_counter() - t0
    return elapsed


def format_result(r: dict, figures: Figures | None = None) -> str:
    figures = figures or Figures()
    lines = [
        f"writer bench: {r['transactions']} transactions, {r['events']} events, {r['bytes'] / 1e6:.1f} MB, fsync={r['fsync']}"
    ]
    for key in (
        "plain_buffered_write",
        "writer",
        "writer_given_stamped",
        "caller_stamp_pass",
        "writer_batches",
        "writer_batches_gtids",
    ):
        x = r[key]
        lines.append(
            f"  {key:24s} {x['events_per_s']:>10,} ev/s {x['mb_per_s']:>8.1f} MB/s {x['seconds']:>8.3f} s"
        )
    lines.append(
        f"  ratio vs plain: writer {r['ratio_writer_vs_plain']:.2f}, "
        f"writer given stamped bytes {r['ratio_stamped_vs_plain']:.2f}"
        f" {figures.goal('writer', r['ratio_stamped_vs_plain'])}"
    )
    lines.append(
        f"  ratio GTID-numbered batches vs batches without GTIDs (time): "
        f"{r['ratio_gtids_vs_batches']:.2f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench writer", description=__doc__)
    p.add_argument(
        "--txns", type=int, default=100_000, help="transactions to write (default 100000)"
    )
    p.add_argument("--rows", type=int, default=1, help="rows per transaction")
    p.add_argument("--row-bytes", type=int, default=100, help="payload bytes per row")
    p.add_argument("--fsync", default="never", help="txn | never | group:N | interval:MS")
    p.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = p.parse_args(argv)
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    r = run_bench(
        args.txns,
        rows_per_txn=args.rows,
        row_bytes=args.row_bytes,
        fsync=args.fsync,
        directory=args.dir,
    )
    print(json.dumps(r, indent=2) if args.json else format_result(r, figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
