"""Who takes over a free lease (docs/dumper.md "High availability", docs/streams.md "Who takes
over"): of the live members that do not lead, the one whose copy reaches furthest, so that the
new term cuts back as little as possible of what followers copied, and so of what consumers
read (the old leader served them only what a follower acknowledged: rule 9).

One stream: the furthest copy (file number, then position); ties go to the lowest id.

Several streams: a copy has an end per stream, and with more than one follower none may be
furthest in every stream. The leader served stream i's consumers up to the furthest end any
follower acknowledged in stream i, so in every stream where the winner is behind another
follower its consumers may have read past the winner's end: the new leader fetches those tails
from the followers that hold them before its term begins (`dumper.ha.stream_tail`). The rule
keeps those fetches few: the member furthest (or level with the furthest) in the most streams
wins; then the greatest sum over the streams of (file number, position), which grows with
every stream; then the lowest id. A member furthest in every stream always wins, as the plain
sum would make it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from binlog_writer import layout
from topology import Member

# A member's copy end in each stream (one entry: the single global binlog).
Ends = Sequence[tuple[str, int]]


def order(file: str, pos: int) -> tuple[int, int]:
    """Binlog coordinates in stream order (`binlog.000012` → 12; "" before any file)."""
    return (layout.file_number(file) if file else 0, pos)


def order_number(file: str, pos: int) -> int:
    """`order` as one number (positions stay below 2**40: 1 TiB files)."""
    number, pos = order(file, pos)
    return (number << 40) + pos


def one_end(ends: Ends) -> tuple[str, int]:
    """A copy's ends as the one file:position members report: the single stream's own, or
    ("", `total`) with several streams."""
    return ends[0] if len(ends) == 1 else ("", total(ends))


def member_ends(m: Member) -> Ends:
    """What member `m` reported: its end per stream, or the single stream's file:position."""
    return m.streams or ((m.file, m.position),)


def winner(candidates: Mapping[int, Ends]) -> int:
    """The dumper id, among `candidates` (id → its copy's ends), that should take over."""
    counts = {len(ends) for ends in candidates.values()}
    if len(counts) > 1:
        # A member that did not report its streams (a version without per-stream reports,
        # during an upgrade): only the sums compare (its position is its sum).
        def rank(item: tuple[int, Ends]) -> tuple[int, ...]:
            return (total(item[1]), -item[0])
    else:
        (streams,) = counts
        furthest = [max(order(*ends[i]) for ends in candidates.values()) for i in range(streams)]

        def rank(item: tuple[int, Ends]) -> tuple[int, ...]:
            dumper_id, ends = item
            ahead = sum(order(*end) == top for end, top in zip(ends, furthest, strict=True))
            return (ahead, total(ends), -dumper_id)

    return max(candidates.items(), key=rank)[0]


def total(ends: Ends) -> int:
    """The sum over the streams of (file number, position) as one number: it grows with every
    stream's copy ("" as a file: an end that is such a sum already)."""
    return sum(order_number(file, pos) if file else pos for file, pos in ends)
