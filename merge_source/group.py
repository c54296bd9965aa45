"""Cut one DN's event stream into binlog groups (one GTID-started transaction each).

MariaDB writes every group as GTID … terminator: XID for a normal transaction, XA_PREPARE for an
XA prepare, the first QUERY for a standalone group (DDL, XA COMMIT/ROLLBACK). Events outside a
group (GTID_LIST, BINLOG_CHECKPOINT, STOP) carry no data and are skipped; a FORMAT_DESCRIPTION is
passed through to the caller, which needs it to decode private rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from itertools import chain

from cdc.binlog import constants, header, query
from cdc.binlog.flavor import FL_STANDALONE, GTID_FLAGS2_OFFSET
from cdc.protocol import DnEvent, dump_packets
from merge_source.scan import (
    group_body,
    group_end,
    log_pos,
    packed_count,
    packed_events,
    packed_group,
)
from merge_source.spill import DEFAULT_SPILL_BYTES, EventSpan, SpanWriter, SpillFile

log = logging.getLogger(__name__)

# Event codes: the codec's (C constants compiled: group.pxd cimports them). QUERY ends only
# some groups (scan.group_end).
TERMINATOR_CODES = frozenset(
    {constants.EventType.XID, constants.EventType.XA_PREPARE, constants.EventType.QUERY}
)


class BinlogGroup:
    """One binlog group: its GTID event, then the raw events after it up to the terminator.

    A group larger than the spill threshold keeps only its GTID in memory; the rest is in a
    spill file (`span`). A group the MergeSource process found whole in one dump batch is the
    packets `packed[first:last]` of that batch (cdc/protocol/dump_packets.py; `events` empty): no
    bytes object per event; `unpack()` turns it into events. `body()` gives the events after
    the GTID either way. A plain slots class: a dataclass's generated __init__ stays
    interpreted in a compiled module.
    """

    __slots__ = ("file", "start", "gtid", "events", "end", "span", "packed", "first", "last")

    def __init__(
        self,
        file: str,
        start: int,  # position of the GTID event
        gtid: bytes,
        events: list[bytes] | None = None,  # after the GTID; empty if spilled
        end: int = 0,  # position after the terminator
        span: EventSpan | None = None,
    ):
        self.file = file
        self.start = start
        self.gtid = gtid
        self.events: list[bytes] = [] if events is None else events
        self.end = end
        self.span = span
        self.packed: bytes | None = None
        self.first = self.last = 0

    def unpack(self) -> None:
        """A packed group's events as bytes in `events` (for the general classification)."""
        if self.packed is not None:
            self.events = packed_events(self.packed, self.first, self.last)
            self.packed = None

    @property
    def flags2(self) -> int:
        return self.gtid[GTID_FLAGS2_OFFSET]

    @property
    def spilled(self) -> bool:
        return self.span is not None

    @property
    def count(self) -> int:
        """Events in the group, GTID included."""
        if self.packed is not None:
            return 1 + packed_count(self.packed, self.first, self.last, -1)
        return 1 + (self.span.count if self.span is not None else len(self.events))

    def body(self) -> Iterable[bytes]:
        """The events after the GTID, streamed from the spill file if spilled."""
        self.unpack()
        return self.span if self.span is not None else self.events


def query_text(data: bytes, checksum_len: int = 4) -> bytes:
    """The statement of a QUERY event (status vars and db skipped), without decoding it."""
    if len(data) < constants.HEADER_LEN + constants.QUERY_POST_HEADER_LEN:
        raise IndexError(f"a QUERY event of {len(data)} bytes has no post-header")
    return bytes(data[query.text_start(data, 0) : len(data) - checksum_len])


def _packed_group(file, start, gtid, end, data, first, last) -> BinlogGroup:  # C: group.pxd
    """A BinlogGroup of the packets `data[first:last]`, made field by field (compiled: no
    argument parsing of its __init__, once per group)."""
    group = BinlogGroup.__new__(BinlogGroup)
    group.file, group.start, group.gtid, group.end = file, start, gtid, end
    group.events, group.span = [], None
    group.packed, group.first, group.last = data, first, last
    return group


def packed_groups(file: str, data: bytes, q, stop, limit, out: list):  # C: group.pxd
    """The groups whole in the packets `data[q:stop]` (none open at `q`), each a BinlogGroup of
    its range of packets, and the FORMAT_DESCRIPTION events, appended to `out` in stream order;
    where it stopped: `stop`, or the GTID of a group that does not end in the batch or is
    larger than `limit` bytes (the caller hands the rest to `assemble_raw`)."""
    p = data
    gtid, fde = constants.EventType.MARIADB_GTID, constants.EventType.FORMAT_DESCRIPTION
    event_at = dump_packets.EVENT_AT
    while q < stop:
        code = dump_packets.event_code(p, q)
        n = dump_packets.packet_len(p, q)
        body = q + 4 + n
        if code == gtid:
            standalone = p[q + event_at + GTID_FLAGS2_OFFSET] & FL_STANDALONE
            j, done, end = packed_group(data, body, stop, standalone)
            if not done or j - q > limit:
                return q
            pos = header.log_pos(p, q + event_at)  # where it starts: its log_pos - its size
            start = pos - (n - 1) if pos else 4
            out.append(_packed_group(file, start, p[q + event_at : body], end, data, body, j))
            q = j
            continue
        if code == fde:
            out.append(DnEvent(file, 4, p[q + event_at : body]))
        q = body  # an event outside any group: nothing to carry
    return q


class GroupAssembler:
    """Feed events in binlog order; complete groups come out.

    A group growing past `spill_bytes` moves to a spill file, so a 1 GB transaction never sits in
    memory as a list of events (0 disables spilling).
    """

    def __init__(
        self,
        dn_name: str = "dn",
        spill_bytes: int = DEFAULT_SPILL_BYTES,
        spill_dir: str | None = None,
    ):
        self.dn_name = dn_name
        self.spill_bytes = spill_bytes
        self.spill_dir = spill_dir
        self._current: BinlogGroup | None = None
        self._standalone = False
        self._size = 0  # bytes of the open group held in memory
        self._writer: SpanWriter | None = None  # set while the open group is spilled
        self.dropped_partial = 0
        self.spilled_groups = 0

    @property
    def open_group_start(self) -> tuple[str, int] | None:
        """Where the group being assembled starts: a restart must re-read from there."""
        if self._current is None:
            return None
        return self._current.file, self._current.start

    def feed(self, event: DnEvent) -> BinlogGroup | None:
        """One event; the group it completes, if any."""
        for item in self.assemble((event,)):
            if type(item) is BinlogGroup:
                return item
        return None

    def assemble(self, events: Iterable[DnEvent]) -> Iterator[BinlogGroup | DnEvent]:
        """Feed events in order; yields each group as it completes, and every FORMAT_DESCRIPTION
        event (outside groups, but the caller needs it), in stream order.

        While an item is out, the assembler is in the state of the stream right after it, so
        `open_group_start` (hence a checkpoint) never runs ahead of what the caller has seen.
        """
        run: list[DnEvent] = []
        for event in events:
            if run and event.file != run[0].file:
                yield from self._assemble_run(run)
                run = []
            run.append(event)
        if run:
            yield from self._assemble_run(run)

    def _assemble_run(self, run: list[DnEvent]) -> Iterator[BinlogGroup | DnEvent]:
        yield from self.assemble_raw(run[0].file, [e.data for e in run], [e.pos for e in run])

    def assemble_raw(
        self, file: str, events: list[bytes], positions: list[int] | None = None
    ) -> Iterator[BinlogGroup | DnEvent]:
        """`assemble` for events of one file as bytes (the dump client's raw batches): an
        event starts at `positions[i]`, or, without positions, where its log_pos says."""
        group: BinlogGroup | None = self._current
        writer, size = self._writer, self._size
        standalone = self._standalone
        limit = self.spill_bytes or float("inf")
        n = len(events)
        i = 0
        # The codec's codes, looked up once (as Python, an IntEnum member costs more per event)
        gtid, fde = constants.EventType.MARIADB_GTID, constants.EventType.FORMAT_DESCRIPTION
        query_code = constants.EventType.QUERY
        try:
            while i < n:
                data = events[i]
                code = data[4]
                if code == gtid:
                    if positions is not None:
                        pos = positions[i]
                    else:  # where it starts: its log_pos (where the next one starts) - size
                        pos = log_pos(data)
                        pos = pos - len(data) if pos else 4
                    if group is not None:
                        self._drop_partial(group)
                    # inline, not a method call: one per group
                    group = BinlogGroup(file, pos, data)
                    writer, size = None, len(data)
                    standalone = bool(data[GTID_FLAGS2_OFFSET] & FL_STANDALONE)
                    self._current = group
                    i += 1
                    continue
                if code == fde:
                    yield DnEvent(file, positions[i] if positions is not None else 4, data)
                    i += 1
                    continue
                if group is None:
                    i += 1
                    continue
                if writer is None:
                    # The events of the open group up to its terminator, found in one compiled
                    # pass (scan.group_body), taken as one list slice.
                    j, grown, done = group_body(events, i, standalone)
                    if group.events:
                        group.events += events[i:j]
                    else:
                        group.events = events[i:j]
                    size += grown
                    if size > limit:
                        writer = self._writer = self._spill(group)
                        size = 0
                else:
                    writer.append(data)
                    j = i + 1
                    done = code in TERMINATOR_CODES and (
                        code != query_code or group_end(data, standalone)
                    )
                i = j
                if done:
                    last = events[j - 1]
                    group.end = (
                        positions[j - 1] + len(last) if positions is not None else log_pos(last)
                    )
                    if writer is not None:
                        group.span = writer.span()
                    finished, group, writer, size = group, None, None, 0
                    # open_group_start is read while the group is out (the rest: `finally`)
                    self._current = None
                    yield finished
        finally:
            self._current, self._writer, self._size = group, writer, size
            self._standalone = standalone

    def assemble_packed(self, file: str, data: bytes, q, stop) -> Iterable[BinlogGroup | DnEvent]:
        """`assemble_raw` for a dump batch kept as its packets: `data[q:stop]`, complete
        packets of plain events of `file` (what `split_events` took). A group whole in the batch
        comes out as its range of packets (no bytes object per event); a group open at either
        end of the batch, or larger than the spill threshold, goes through `assemble_raw` as
        event bytes. Mostly a list (the batch's whole groups: no generator resumed per group);
        no group is open while its items are out, as with `assemble_raw`."""
        if self._current is not None:  # the group the last batch left open
            return self._assemble_packed_open(file, data, q, stop)
        items: list = []
        q = packed_groups(file, data, q, stop, self.spill_bytes or stop, items)
        if q < stop:  # a group open at the batch's end, cut short, or huge: as event bytes
            return chain(items, self.assemble_raw(file, packed_events(data, q, stop)))
        return items

    def _assemble_packed_open(self, file: str, data: bytes, q, stop) -> Iterator:
        """`assemble_packed` when the last batch left a group open: up to its end as bytes."""
        j, done, _end = packed_group(data, q, stop, self._standalone)
        if not done:  # still open, or cut short: the whole batch the general way
            yield from self.assemble_raw(file, packed_events(data, q, stop))
            return
        yield from self.assemble_raw(file, packed_events(data, q, j))
        yield from self.assemble_packed(file, data, j, stop)

    def _drop_partial(self, group: BinlogGroup) -> None:
        # Only a crashed DN leaves a group without terminator; MariaDB's recovery then
        # truncates it from the binlog and rolls it back in the engine.
        log.warning(
            "%s: group at %s:%d has no terminator; dropped (DN crash?)",
            self.dn_name,
            group.file,
            group.start,
        )
        self.dropped_partial += 1

    def _spill(self, group: BinlogGroup) -> SpanWriter:
        writer = SpanWriter(SpillFile(self.spill_dir))
        writer.extend(group.events)
        group.events = []
        self.spilled_groups += 1
        log.info(
            "%s: group at %s:%d is larger than %d bytes: spilled to disk",
            self.dn_name,
            group.file,
            group.start,
            self.spill_bytes,
        )
        return writer
