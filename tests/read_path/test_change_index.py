"""The changed keys' index (read_path/change_index.py, dumper/server/store/change_index.py)
against the scan it replaces: over generated global binlog files (several files, many small
segments, keys changed again and again, inserts, updates that move a key, deletes, another
table, a DDL), a read's map from every transaction boundary is the same with the index as
without, key for key and byte for byte, in the same order; an index that disagrees with its
file is not used."""

from __future__ import annotations

import asyncio
import random

import pytest

from binlog_writer.writer import BinlogWriter, FsyncPolicy
from cdc.binlog.constants import ColumnType as T
from cdc.binlog.events import XidEvent, cts_mark
from cdc.binlog.query import QueryEvent
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column, TableMapEvent
from dumper.server.store.binlog_files import BinlogFiles
from dumper.server.store.change_index import ChangeIndexes
from read_path import changes
from read_path.changes import ChangedKeys
from read_path.first_images import TableChangedByDdl

DB = "gw"
COLS = [
    Column(T.LONG, nullable=False, name=b"id"),
    Column(T.VARCHAR, 256, name=b"v", collation=45),
    Column(T.LONGLONG, name=b"n"),
]
KEYS = 60  # few keys, many changes: most changes are of a key changed before


def _write(directory, ddl_at: int | None = None, txns: int = 400) -> list:
    """`txns` transactions on gw.t (and gw.u) into files of ~20 KB; the boundaries written."""
    rng = random.Random(7)
    t = TableMapEvent.from_columns(11, DB, "t", COLS, primary_key=[0])
    u = TableMapEvent.from_columns(12, DB, "u", COLS, primary_key=[0])
    rows: dict[int, list] = {}
    bounds = []
    tso = 1000
    with BinlogWriter(directory, max_file_size=20_000, fsync=FsyncPolicy.never()) as w:
        for n in range(txns):
            tso += 1
            if n == ddl_at:
                txn = [QueryEvent(b"ALTER TABLE t ADD COLUMN z INT", db=DB.encode()), cts_mark(tso)]
                bounds.append(w.append_transaction(txn))
                continue
            txn: list[object] = [QueryEvent(b"BEGIN", db=DB.encode())]
            for _ in range(rng.randrange(1, 4)):
                k = rng.randrange(KEYS)
                if k not in rows:
                    rows[k] = [k, f"v{k}-{n}".encode(), n]
                    txn += [t, RowsEvent.from_rows(30, 11, COLS, [rows[k]])]
                elif rng.random() < 0.15:
                    txn += [t, RowsEvent.from_rows(32, 11, COLS, [rows.pop(k)])]
                elif rng.random() < 0.1 and (m := k + KEYS) not in rows:  # the key moves
                    after = [m, rows[k][1], n]
                    txn += [t, RowsEvent.from_rows(31, 11, COLS, [(rows.pop(k), after)])]
                    rows[m] = after
                else:
                    after = [k, f"v{k}-{n}".encode() * rng.randrange(1, 4), None]
                    txn += [t, RowsEvent.from_rows(31, 11, COLS, [(rows[k], after)])]
                    rows[k] = after
            if rng.random() < 0.3:
                txn += [u, RowsEvent.from_rows(30, 12, COLS, [[n, b"u", n]])]
            txn += [XidEvent(tso), cts_mark(tso)]
            bounds.append(w.append_transaction(txn))
    return bounds


def _index(directory, segment_bytes: int = 1500) -> ChangeIndexes:
    index = ChangeIndexes(BinlogFiles(directory), segment_bytes=segment_bytes)

    async def build() -> None:
        while await index.step():
            pass

    asyncio.run(build())
    return index


def _read(files, start, index=None):
    keys = ChangedKeys(files, start, (DB, "t"), [0], tuple, len(COLS), index=index)
    asyncio.run(keys.advance())
    changes = {k: None if v is None else v.data for k, v in keys.changes.items()}
    return changes, list(keys.added), keys.max_mark, keys.indexed


@pytest.mark.parametrize("whole", [16 << 20, 0], ids=["segment read whole", "image by image"])
def test_index_gives_the_scans_first_images_from_every_boundary(tmp_path, monkeypatch, whole):
    monkeypatch.setattr(changes, "WHOLE_SEGMENT", whole)
    bounds = _write(tmp_path)
    index = _index(tmp_path)
    files = BinlogFiles(tmp_path)
    assert len(files.names()) > 3
    assert sum(len(index.segments(n)) for n in files.names()) > 20
    used = 0
    for b in bounds[::3] + [bounds[-1]]:
        scanned = _read(files, (b.file, b.start))
        indexed = _read(files, (b.file, b.start), index)
        assert indexed[:3] == scanned[:3], b
        used += indexed[3]
    assert used > 100  # the index answered for most segments
    assert index.nbytes() > 0


def test_ddl_after_the_point_fails_the_same(tmp_path):
    bounds = _write(tmp_path, ddl_at=250)
    index = _index(tmp_path)
    files = BinlogFiles(tmp_path)
    for b in (bounds[10], bounds[200]):
        errors = []
        for idx in (None, index):
            with pytest.raises(TableChangedByDdl) as exc:
                _read(files, (b.file, b.start), idx)
            errors.append(str(exc.value))
        assert errors[0] == errors[1]
    after = bounds[251]
    assert (
        _read(files, (after.file, after.start), index)[:3]
        == _read(files, (after.file, after.start))[:3]
    )


def test_an_index_that_disagrees_with_its_file_is_dropped(tmp_path):
    _write(tmp_path, txns=120)
    index = _index(tmp_path)
    files = BinlogFiles(tmp_path)
    name = files.names()[0]
    segs = index.segments(name)
    assert len(segs) > 2
    path = files.path(name)
    data = bytearray(path.read_bytes())
    data[segs[1].end - 30] ^= 0xFF  # the file changed under its index (as a rewrite would)
    path.write_bytes(bytes(data))
    assert [s.end for s in index.segments(name)] == [segs[0].end]
    # and built again from there
    asyncio.run(index.step())
    assert len(index.segments(name)) == 2


def test_built_once_a_read_starts_more_than_a_segment_back(tmp_path):
    bounds = _write(tmp_path, txns=120)
    files = BinlogFiles(tmp_path)
    index = ChangeIndexes(files, segment_bytes=1500)
    end = (files.names()[-1], files.size(files.names()[-1]))
    _read(files, end, index)  # a read at the end
    assert not index.wanted
    _read(files, (bounds[0].file, bounds[0].start), index)  # one as of an old point
    assert index.wanted


def test_a_purged_file_loses_its_index(tmp_path):
    _write(tmp_path, txns=120)
    index = _index(tmp_path)
    files = BinlogFiles(tmp_path)
    first = files.names()[0]
    files.purge([first])
    asyncio.run(index.step())
    assert first not in index._segments
