"""Pure: one chunk of a snapshot read — the rows of the table as of P whose primary key is in
`(lo, hi]`, from what the shards' reads returned and the keys the global binlog changed after P.

Why exact (docs/snapshot-reads.md has the whole argument): every shard was read up to at least
`hi` before the chunk's high watermark H, and `changed` holds, for every key changed in the
global binlog between P and (at least) H, its state at P (the before-image of its first change,
None when that change created the key). A key not in `changed` was not changed between P and
any read, so a read shows its state at P, from the one shard that holds it; a key in `changed`
is taken from there, whatever the reads saw (read twice, missed, or a later state). A key is
in exactly one chunk's range, so it is emitted once.

Rows are (key, payload): keys are tuples of ints when the primary key is made of integers (their
order in Python is the DN's, so chunks may be bounded), else tuples of each column's order
(`read._order_of`: a string's under its collation), in one unbounded chunk (no bound is sent to
the DN); payloads are what the caller sends."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import TypeVar

Key = tuple
P = TypeVar("P")
Image = TypeVar("Image")
_KEY = itemgetter(0)


def take_chunk(
    rows: list[list[tuple[Key, P]]],
    lo: Key | None,
    hi: Key | None,
    changed: Mapping[Key, Image | None],
    render: Callable[[Image], P | None],
    images: Iterable[Key] | None = None,
) -> list[tuple[Key, P]]:
    """The chunk `(lo, hi]` (None: unbounded) in key order, from `rows`: each shard's rows read
    with a key in it (`take_until`), in key order. `render` turns a before-image into a payload,
    or None when it does not match the statement's WHERE. `images`: every changed key in the
    chunk, when the caller knows (else every key of `changed` is looked at)."""
    if images is None:
        images = [k for k in changed if (lo is None or k > lo) and (hi is None or k <= hi)]
    images = list(images)
    mine = set(images)
    out: list[tuple[Key, P]] = []
    for shard in rows:
        if mine:
            out.extend([row for row in shard if row[0] not in mine])
        else:
            out.extend(shard)
    # In the caller's order (at_p's is the keys' own): one more sorted run for the sort below
    # to merge, rather than a shuffled tail it must sort piece by piece.
    for key in images:
        image = changed[key]
        if image is None:
            continue
        payload = render(image)
        if payload is not None:
            out.append((key, payload))
    out.sort(key=_KEY)  # the shards' runs merged (the sort finds them)
    return out


def take_until(buf: list[tuple[Key, P]], hi: Key | None) -> list[tuple[Key, P]]:
    """The rows of `buf` (in key order) with a key ≤ `hi` (all when None), taken out of it:
    the chunk's share of a shard, set apart before its watermark while the buffer is refilled
    with later keys."""
    at = len(buf) if hi is None else bisect_right(buf, hi, key=_KEY)
    out = buf[:at]
    del buf[:at]
    return out


def chunk_bound(lasts: list[Key | None], exhausted: list[bool]) -> Key | None:
    """The chunk's upper bound: the smallest last key read of the shards that may hold more
    (every key up to it was read from every shard); None when every shard is exhausted."""
    open_ends = [last for last, done in zip(lasts, exhausted, strict=True) if not done]
    if not open_ends:
        return None
    if any(last is None for last in open_ends):
        raise ValueError("a shard that is not exhausted has read no key")
    return min(open_ends)  # type: ignore[type-var]
