"""Flink CDC's incremental snapshot (its MySQL source's default), step by step against the dumper
while transfers run (issue 32, 3c): the table's MIN/MAX of the key and SHOW TABLE STATUS's row
estimate, the chunks' bounds by Flink's split query (`queryNextChunkMax`), then per chunk a low
watermark (SHOW MASTER STATUS), the chunk read (`buildSplitScanQuery`'s WHERE), a high
watermark, and the binlog between the two applied to the chunk (Flink's
`SnapshotSplitReader` normalisation); then the binlog from the smallest high watermark, a change
applied only past the high watermark of its key's chunk. Read with python-mysql-replication, a
real binlog client. The result must equal the shards once the transfers stopped.

Flink's default chunk size (8096 rows) would make bank.accounts (300 rows) one chunk; the test's
(`CDC_FLINK_CHUNK`, default 40) makes several, each with its own watermarks under transfers."""

from __future__ import annotations

import os
import time

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from tests.read_path.conftest import ACCOUNTS, BALANCE, READER

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),  # pmr's own
]
CHUNK = int(os.environ.get("CDC_FLINK_CHUNK", "40"))
TABLE = "`bank`.`accounts`"
Position = tuple[str, int]


def master_status(cur) -> Position:
    cur.execute("SHOW MASTER STATUS")
    file, pos = cur.fetchone()[:2]
    return file, int(pos)


def changes(snap, start: Position, end: Position, server_id: int):
    """(position after the event, kind, before, after) of bank.accounts' row changes in
    (start, end]; `before`/`after` are rows as dicts (None for an insert's before...)."""
    stream = BinLogStreamReader(
        connection_settings={
            "host": "127.0.0.1",
            "port": snap.config.dumper.port,
            "user": READER[0],
            "passwd": READER[1],
        },
        server_id=server_id,
        blocking=False,
        resume_stream=True,
        log_file=start[0],
        log_pos=start[1],
        only_events=[RotateEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    file = start[0]
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                file = ev.next_binlog
                continue
            at = (file, ev.packet.log_pos)
            if at > end:
                return
            if (ev.schema, ev.table) != ("bank", "accounts"):
                continue
            for row in ev.rows:
                if isinstance(ev, WriteRowsEvent):
                    yield at, None, row["values"]
                elif isinstance(ev, UpdateRowsEvent):
                    yield at, row["before_values"], row["after_values"]
                else:
                    yield at, row["values"], None
    finally:
        stream.close()


def apply(table: dict, before, after, inside) -> None:
    """One row change on `table` (id → balance), for the keys `inside` accepts."""
    if before is not None and inside(before["id"]):
        table.pop(before["id"], None)
    if after is not None and inside(after["id"]):
        table[after["id"]] = after["balance"]


def in_split(start, end):
    """Flink's split [start, end): None is unbounded."""
    return lambda k: (start is None or k >= start) and (end is None or k < end)


def test_flink_incremental_snapshot_under_transfers(snap):
    assert not snap.traffic_errors
    conn = snap.connect(READER, database="bank")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT MIN(`id`), MAX(`id`) FROM " + TABLE)
            low_key, high_key = cur.fetchone()
            cur.execute("USE `bank`")
            cur.execute("SHOW TABLE STATUS LIKE 'accounts'")
            status = cur.fetchone()
            assert status[0] == "accounts" and 0 < int(status[4]) < 10 * ACCOUNTS  # an estimate

            # Chunks (Flink's splitUnevenlySizedChunks): the next chunk's end by the split query.
            splits: list[tuple[int | None, int | None]] = []
            chunk_start, chunk_end = None, low_key
            while True:
                cur.execute(
                    f"SELECT MAX(`id`) FROM (SELECT `id` FROM {TABLE} WHERE `id` >= {chunk_end} "
                    f"ORDER BY `id` ASC LIMIT {CHUNK}) AS T"
                )
                (nxt,) = cur.fetchone()
                if nxt == chunk_end:  # Flink then asks for the next key
                    cur.execute(f"SELECT MIN(`id`) FROM {TABLE} WHERE `id` > {chunk_end}")
                    (nxt,) = cur.fetchone()
                if nxt is None or nxt >= high_key:
                    break
                splits.append((chunk_start, nxt))
                chunk_start, chunk_end = nxt, nxt
            splits.append((chunk_start, None))
            assert len(splits) >= ACCOUNTS // CHUNK - 1

            table: dict[int, int] = {}
            high_marks = []
            for n, (start, end) in enumerate(splits):
                low = master_status(cur)
                if start is None:
                    where = f"`id` <= {end} AND NOT (`id` = {end})"
                elif end is None:
                    where = f"`id` >= {start}"
                else:
                    where = f"`id` >= {start} AND NOT (`id` = {end}) AND `id` <= {end}"
                cur.execute(f"SELECT * FROM {TABLE} WHERE {where}")
                names = [d[0] for d in cur.description]
                chunk = {r[names.index("id")]: r[names.index("balance")] for r in cur.fetchall()}
                high = master_status(cur)
                if high != low:  # the backfill between the watermarks (Flink's normalisation)
                    for _, before, after in changes(snap, low, high, 5300 + n):
                        apply(chunk, before, after, in_split(start, end))
                table.update(chunk)
                high_marks.append((in_split(start, end), high))
    finally:
        conn.close()

    snap.stop_traffic()
    try:
        truth = shard_balances(snap)
        end = caught_up(snap, truth)
        # The binlog phase: from the smallest high watermark, a change counts once past its
        # chunk's high watermark.
        for at, before, after in changes(snap, min(h for _, h in high_marks), end, 5299):
            for inside, high in high_marks:
                if at > high:
                    apply(table, before, after, inside)
    finally:
        snap.start_traffic()
    assert len(table) == ACCOUNTS
    assert sum(table.values()) == ACCOUNTS * BALANCE
    assert table == truth


def caught_up(snap, truth: dict[int, int], timeout: float = 60) -> Position:
    """The global binlog's end once it holds every transfer the DNs committed (`truth`): the
    last ones reach it a pipeline's latency after the traffic stopped. A read through the
    dumper is as of the end when it starts, so the end read after it holds what it saw."""
    deadline = time.monotonic() + timeout
    while True:
        conn = snap.connect(READER)
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT id, balance FROM {TABLE}")
                seen = dict(cur.fetchall())
                end = master_status(cur)
        finally:
            conn.close()
        if seen == truth:
            return end
        assert time.monotonic() < deadline, "the global binlog did not reach the DNs' state"
        time.sleep(0.2)


def shard_balances(snap) -> dict[int, int]:
    """bank.accounts read from its physical shards on the DNs (the source itself)."""
    out: dict[int, int] = {}
    for node in snap.config.dn:
        conn = pymysql.connect(
            host=node.host, port=node.port, user=node.user, password=node.password
        )
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW TABLES FROM bank_p")
                for (name,) in cur.fetchall():
                    if name.startswith("accounts_"):
                        cur.execute(f"SELECT id, balance FROM bank_p.`{name}`")
                        out.update(dict(cur.fetchall()))
        finally:
            conn.close()
    return out
