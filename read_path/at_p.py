"""A table's rows at P, chunk by chunk (docs/snapshot-reads.md, steps 2-4): the shards' pages
read ahead (`read_ahead.py`), each chunk's high watermark waited for in the global binlog
(`changes.py` read on until a CTS mark or the merged TSO passes it), then the chunk's rows at P
(`chunks.take_chunk`: the pages' rows, a changed key's before-image instead)."""

from __future__ import annotations

import bisect
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from cdc.protocol.framed_rows import FramedRows
from cdc.protocol.sql_error import SqlError
from read_path.changes import ChangedKeys
from read_path.chunks import Key, take_chunk
from read_path.first_images import Image
from read_path.image_text import ImageSpeller
from read_path.key_rows import IntRows, merge_framed
from read_path.pages import order_of
from read_path.plan import Plan
from read_path.read_ahead import ReadAhead
from read_path.request import Where, unsupported
from read_path.served import Progress
from read_path.values import split_fields, text_row
from read_path.where import matches

# The rows a statement holds (read and not yet sent): at most this many pages per shard
# (read_ahead.py), enough to read on through a few chunks' watermark waits.
READ_AHEAD_PAGES = 4
# The global binlog reaches a fresh TSO within one heartbeat plus the pipeline's latency; this
# long means the pipeline is not merging.
WATERMARK_WAIT_S = 30.0
ER_UNKNOWN = 1105

# A shard's next page after a key: (key, the data columns' text row) in key order.
PageReader = Callable[[int, Key | None, int], Awaitable[list[tuple[Key, bytes]]]]


async def rows_at_p(
    plan: Plan,
    where: Where | None,
    changes: ChangedKeys,
    shards_by_dn: list[list[int]],
    read_shard: PageReader,
    page_rows: int,
    tso: Callable[[], Awaitable[int]],
    progress: Progress,
    *,
    split: bool = False,
    buffers: bool = False,
) -> AsyncIterator[list | FramedRows]:
    """The table's rows at P matching the WHERE, in key order, a chunk (a list) at a time:
    text rows of the data columns (or their fields, `split`). `shards_by_dn`: the shards'
    numbers, those of one DN together; `read_shard(i, after, rows)`: shard i's next page.
    `buffers` (a key of one integer column that fits 64 bits, not `split`): the pages are
    `key_rows.IntRows` and each chunk is merged straight into framed packets
    (`FramedRows`), with no Python object per row."""
    ndata = len(plan.data)
    shards = sum(len(group) for group in shards_by_dn)

    # Each table map's columns → its speller (changes.py holds one list per distinct map,
    # for the whole read: an id is not reused while it is in here).
    spellers: dict[int, ImageSpeller] = {}
    every = list(range(len(plan.columns)))

    # The same for an image of another shape than the shards' (a read as of a point before
    # an ADD COLUMN: `Image.picks`), with the image positions of `plan.data` and of all.
    shaped: dict[tuple[int, tuple[int, ...]], tuple[ImageSpeller, list[int], list[int]]] = {}

    def speller_of(before: Image) -> tuple[ImageSpeller, list[int], list[int]]:
        picks = before.picks
        if picks is None:
            speller = spellers.get(id(before.columns))
            if speller is None or speller.columns is not before.columns:
                speller = spellers[id(before.columns)] = ImageSpeller(
                    before.columns, plan.columns, plan.members, plan.exact_floats
                )
            return speller, plan.data, every
        key = (id(before.columns), tuple(picks))
        found = shaped.get(key)
        if found is None or found[0].columns is not before.columns:
            defs: list = [None] * len(before.columns)
            for i, at in enumerate(picks):
                defs[at] = plan.columns[i]
            members = {picks[i]: m for i, m in plan.members.items()}
            speller = ImageSpeller(before.columns, defs, members, plan.exact_floats)
            found = shaped[key] = (speller, [picks[i] for i in plan.data], list(picks))
        return found

    # The last plain image's speller: the images of a read mostly share one table map.
    last: list = [None, None]

    def render(before: Image):
        if before.picks is None and before.columns is last[0] and where is None and not split:
            return last[1].row(before.data, plan.data)
        speller, data, all_ = speller_of(before)
        if where is None and not split:
            if before.picks is None:
                last[0], last[1] = before.columns, speller
            return speller.row(before.data, data)
        texts = split_fields(speller.row(before.data, all_), len(all_))[0]

        def lookup(column: str):
            i = plan.index[column]
            return plan.columns[i], texts[i]

        if not matches(where, lookup):
            return None
        fields = [texts[i] for i in plan.data]
        return fields if split else text_row(fields)

    async def read_page(i: int, after: Key | None) -> list[tuple[Key, object]]:
        """(key, the data columns' text row, or its fields when `split`) of the next page
        of shard i."""
        page = await read_shard(i, after, page_rows)
        if not plan.integer_key:
            if len(page) == page_rows:
                raise unsupported(
                    f"more than snapshot_page_rows ({page_rows - 1}) rows in a shard of a "
                    "table whose primary key is not made of integers"
                )
            # Keyed by their order (the collation's), as the before-images are, so that
            # the shards merge in the DN's order and a key is found whatever its spelling.
            page = [(order_of(plan, key), data) for key, data in page]
        if split:
            return [(key, split_fields(data, ndata)[0]) for key, data in page]
        return page  # type: ignore[return-value]

    async def read_buffers(i: int, after: Key | None) -> IntRows:
        return await read_shard(i, after, page_rows)  # type: ignore[return-value]

    assert not buffers or (not split and plan.integer_key and len(plan.key) == 1)
    reads = ReadAhead(
        shards_by_dn,
        read_buffers if buffers else read_page,
        page_rows,
        READ_AHEAD_PAGES * shards * page_rows,
        tso,
        IntRows if buffers else list,
    )
    reads.start()
    try:
        lo: Key | None = None
        # The changed keys above `lo`, sorted: a chunk looks at its own range only (the
        # map may hold many keys; a chunk would otherwise walk all of them).
        ahead: list[Key] = []
        seen = 0
        while True:
            # Chunk (lo, hi]: every key up to hi was read from every shard before its
            # TSO `high` was taken (read_ahead.py); later reads hold keys above hi only.
            hi, current, high = await reads.next_chunk()
            await watermark(changes, high, progress)
            # One at or below lo was emitted from its read. The new keys join in one sort
            # (the sorted run and the new ones merged), not one insertion each.
            new = [key for key in changes.added[seen:] if lo is None or key > lo]
            if new:
                ahead.extend(new)
                ahead.sort()
            seen = len(changes.added)
            mine = len(ahead) if hi is None else bisect.bisect_right(ahead, hi)
            if buffers:
                yield framed_chunk(current, changes.changes, render, ahead[:mine])
            else:
                chunk = take_chunk(current, lo, hi, changes.changes, render, ahead[:mine])
                yield [payload for _key, payload in chunk]
            del ahead[:mine]
            reads.release(sum(len(rows) for rows in current))
            if hi is None:
                return
            lo = hi
    finally:
        reads.close()


def framed_chunk(
    parts: list[IntRows],
    changed: dict[Key, Image | None],
    render: Callable[[Image], bytes | None],
    images: list[Key],
) -> FramedRows:
    """`chunks.take_chunk` for rows held as buffers, framed: the shards' rows whose key did
    not change, and the changed keys' before-images that are rows at P (`images`: the chunk's
    changed keys, sorted), merged in key order into packets."""
    skip, keys, sizes, payloads = [], [], [], []
    for key in images:
        k = key[0].to_bytes(8, "little", signed=True)
        skip.append(k)
        image = changed[key]
        if image is not None and (payload := render(image)) is not None:
            keys.append(k)
            sizes.append(len(payload).to_bytes(4, "little"))
            payloads.append(payload)
    shown = IntRows()
    shown.keys, shown.sizes, shown.blob = (
        bytearray(b"".join(keys)),
        bytearray(b"".join(sizes)),
        bytearray(b"".join(payloads)),
    )
    return FramedRows(*merge_framed(parts, bytearray(b"".join(skip)), shown))


async def watermark(changes: ChangedKeys, high: int, progress: Progress) -> None:
    """`high`, a TSO H taken after the reads: the global binlog read until a CTS mark ≥ H
    (or the merged TSO past it): every change any read saw is then in `changes`
    (docs/snapshot-reads.md, step 3)."""
    deadline = time.monotonic() + WATERMARK_WAIT_S
    while True:
        # The leader's merged TSO, read before the scan: once past H, every transaction
        # below H is in the files this scan reads (heartbeats move it, though they are
        # never written: an idle binlog gets no CTS mark past H).
        merged = progress.merged_tso()
        await changes.advance()
        if changes.max_mark >= high or (merged is not None and merged >= high):
            return
        if time.monotonic() > deadline:
            raise SqlError(
                f"the global binlog did not reach the read's high watermark (TSO {high}) "
                f"within {WATERMARK_WAIT_S:.0f} s (read up to {changes.file}:{changes.pos}): "
                "is the pipeline merging? (its heartbeats advance the binlog)",
                ER_UNKNOWN,
                "HY000",
            )
        await progress.wait(0.05)
