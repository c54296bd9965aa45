"""The frames between a MergeSource process and the leader (MergeJoint), as protobuf messages.

The contract is `frames.proto` (its comments say what each field means); this module turns
fragments and watermarks into those messages and back. A frame (`cdc.frames`: a u32 length,
then the message) holds one serialized `Frame`: a batch, a status, or a fatal error (the last
one the process sends).

A batch is a few columns (packed repeated integers: 8 per fragment in one, 3 per statement in
another; one `bytes` value per statement with its events concatenated): the leader reads a
handful of fields per batch, not several per fragment, and keeps each statement's events as
the one bytes value they came in (`Statement.packed`: every event carries its size at header
offset 9, which the decode checks), for the encoder to walk in C. A statement spilled to disk
does not cross the pipe: the sender copies it into a handoff file and sends its path, the receiver adopts the file
(`spill.write_handoff` / `SpillFile.adopt`), so a 1 GB transaction never sits in either
process's memory.

A batch frame, the one per DN event's worth of traffic, is protobuf's encoding of the message
written and read here byte for byte in C (`_batch_frame`, `read_batch_frame`), not built as a
message; statuses, errors and any other layout go through protobuf.
"""

from __future__ import annotations

import struct
from typing import Any

from google.protobuf.message import DecodeError

from cdc import named_tuple  # NamedTuples built in C (compiled: named_tuple.pxd)
from cdc.binlog import constants, header
from cdc.frames import FRAME, framed
from cdc.keys import Checkpoint, Kind, SortKey, stream_name
from merge_source.fragment import Fragment, FragmentKind, Statement, Watermark, new_fragment
from merge_source.frames_pb2 import Checkpoint as CheckpointMessage
from merge_source.frames_pb2 import Frame, Marker
from merge_source.spill import EventSpan, SpillFile, write_handoff

FRAGMENT_FIELDS = 8  # entries of Batch.fragments per fragment (frames.proto)
KINDS = list(FragmentKind)  # by position, as the proto's enum FragmentKind
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
_DATA = FragmentKind.DATA
assert KIND_CODE[_DATA] == 0
SORT_KINDS = tuple(Kind)  # by value (BRANCH 0, LOCAL 1): an index, not an Enum call per record


class WireError(RuntimeError):
    """A frame that does not decode: the MergeSource process and this one disagree."""


def encode_batch(items: list[Fragment | Watermark], spill_dir: str | None = None) -> bytes:
    """One frame of `items`, all of one DN. The receiver gets the fragments in order, then the
    watermarks in order (what MergeJoint does with a batch anyway)."""
    try:
        return _batch_frame(items, spill_dir)
    except OverflowError as exc:  # a negative value, or one past its field's 32 or 64 bits
        raise WireError(f"a value frames.proto cannot hold: {exc}") from None


# The batch frame is written byte by byte as protobuf would serialize `Frame(batch=Batch(...))`
# (tests/merge_source/test_wire.py checks the bytes are the same): a message's fields in
# field-number order, a field at its default value left out (proto3), a packed column as one
# length-delimited field. A protobuf message cost the worker a Python int and a container append
# per column entry and then the serialization (~745 instructions per DN event); here each entry
# goes from the Fragment straight into its column as a varint, in C. Markers (rare) still go
# through protobuf's Marker, which checks their columns against frames.proto.
_WIRE_LEN = 2  # protobuf's wire type of a length-delimited field
_VARINT_MAX = 10  # bytes of a uint64's varint


def _varint(out, v):  # C types: wire.pxd
    """Appends `v` to `out` as a base-128 varint (a uint64: compiled, the C conversion of the
    argument refuses anything else with an OverflowError)."""
    if v < 0 or v >> 63 >> 1:  # plain Python: the same refusal
        raise OverflowError(f"{v} is not a uint64")
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return 0


def _put(out, at, v):  # C types: wire.pxd
    """Writes `v` as a varint into out[at:] (the caller made room: `_room`) and returns where
    it ends: the hot columns are written in place, not grown by an append (a resize) per byte."""
    if v < 0 or v >> 63 >> 1:  # plain Python: the C conversion's refusal
        raise OverflowError(f"{v} is not a uint64")
    while v >= 0x80:
        out[at] = v & 0x7F | 0x80
        v >>= 7
        at += 1
    out[at] = v
    return at + 1


def _room(out, at, n):  # C types: wire.pxd
    """Makes out[at:] at least `n` bytes long (doubling it: amortised like an append)."""
    if len(out) - at < n:
        out += bytes(len(out) + n)
    return 0


def _varint32(out, v):  # C types: wire.pxd
    """`_varint` of a uint32 field's value (protobuf refuses a larger one)."""
    if v > 0xFFFFFFFF:
        raise OverflowError(f"{v} is not a uint32")
    return _varint(out, v)


def _field(out, field, data):  # C types: wire.pxd
    """Appends a length-delimited field (a packed column, a message, a string), unless empty."""
    if len(data):
        out.append(field << 3 | _WIRE_LEN)
        _varint(out, len(data))
        out += data
    return 0


def _batch_frame(items, spill_dir):  # C types: wire.pxd
    # the columns of frames.proto's Batch (fragments, ...), each entry as a varint
    head, parts, stmts, marks = bytearray(), bytearray(), bytearray(), bytearray()
    events = bytearray()  # one length-delimited field per statement: its tag, length, events
    spilled, markers, checkpoints = bytearray(), bytearray(), bytearray()  # messages, tagged
    hp = pp = sp = mp = 0  # where head, parts, stmts, marks are written up to
    dn = -1
    i = 0  # fragment index
    s = 0  # statement index
    w = 0  # watermark index
    for item in items:
        if dn != item.dn:
            if dn != -1:
                raise WireError(f"one batch holds DN {dn} and DN {item.dn}")
            dn = item.dn
        if type(item) is Watermark:
            mark: Watermark = item
            tso, sort_kind, seq = mark.key  # unpacked: see below
            cp = mark.checkpoint
            if cp is not None:  # its stream is the watermark's DN: not sent
                msg = bytearray()  # a Checkpoint message
                if w:
                    msg.append(1 << 3)
                    _varint32(msg, w)
                _field(msg, 2, cp[1].encode())
                if cp[2]:
                    msg.append(3 << 3)
                    _varint(msg, cp[2])
                if cp[3]:
                    msg.append(4 << 3)
                    _varint(msg, cp[3])
                checkpoints.append(9 << 3 | _WIRE_LEN)
                _varint(checkpoints, len(msg))
                checkpoints += msg
            _room(marks, mp, 3 * _VARINT_MAX)
            mp = _put(marks, mp, tso)
            mp = _put(marks, mp, sort_kind)
            mp = _put(marks, mp, seq)
            w += 1
            continue
        f: Fragment = item
        # unpacked (a tuple's iterator): k[i] on a NamedTuple goes through a slot wrapper, its
        # Python-level __getitem__ (~700 instructions each)
        tso, sort_kind, seq = f.key
        statements = f.statements
        _room(head, hp, FRAGMENT_FIELDS * _VARINT_MAX)
        hp = _put(head, hp, tso)
        hp = _put(head, hp, sort_kind)
        hp = _put(head, hp, seq)
        hp = _put(head, hp, f.txn_id)
        hp = _put(head, hp, 0 if f.kind is _DATA else KIND_CODE[f.kind])  # an Enum's hash: Python
        hp = _put(head, hp, f.timestamp)
        hp = _put(head, hp, len(f.participants))
        hp = _put(head, hp, len(statements))
        _room(parts, pp, 5 * len(f.participants))
        for p in f.participants:
            if p > 0xFFFFFFFF:
                raise OverflowError(f"{p} is not a uint32")
            pp = _put(parts, pp, p)
        handoff = None  # spilled statements: copied to a handoff file when the first one comes
        for st in statements:
            trace = st.trace_id
            _room(stmts, sp, 1 + 2 * _VARINT_MAX)
            if trace is None:
                stmts[sp] = stmts[sp + 1] = stmts[sp + 2] = 0
                sp += 3
            else:
                stmts[sp] = 1
                sp = _put(stmts, sp + 1, trace[0])
                sp = _put(stmts, sp, trace[1])
            if st.span is None:
                # a MergeSource process's statements are one buffer already (`packed`)
                packed = st.packed
                if packed is None:
                    packed = b"".join(st.in_memory)
                events.append(4 << 3 | _WIRE_LEN)
                _varint(events, len(packed))
                events += packed
                s += 1
                continue
            if handoff is None:
                spilled_spans = [t.span for t in statements if t.span is not None]
                path, starts = write_handoff(spilled_spans, spill_dir)
                handoff = iter(zip(starts, spilled_spans, strict=True))
            start, span = next(handoff)
            msg = bytearray()  # a SpilledStatement message
            if s:
                msg.append(1 << 3)
                _varint32(msg, s)
            _field(msg, 2, path.encode())
            if start:
                msg.append(3 << 3)
                _varint(msg, start)
            if span.size:
                msg.append(4 << 3)
                _varint(msg, span.size)
            if span.count:
                msg.append(5 << 3)
                _varint32(msg, span.count)
            spilled.append(6 << 3 | _WIRE_LEN)
            _varint(spilled, len(msg))
            spilled += msg
            events += b"\x22\0"  # statement_events: an empty value
            s += 1
        if f.markers:
            _markers(markers, i, f.markers)
        i += 1
    del head[hp:], parts[pp:], stmts[sp:], marks[mp:]  # the room left over
    first = bytearray()  # dn, fragments, participants: the fields before the events
    if dn > 0:
        first.append(1 << 3)
        _varint32(first, dn)
    _field(first, 2, head)
    _field(first, 3, parts)
    rest = bytearray()  # the fields after them
    _field(rest, 5, stmts)
    rest += spilled
    rest += markers
    _field(rest, 8, marks)
    rest += checkpoints
    frame = bytearray(FRAME.size)  # the frame's length, then Frame.batch's tag and length
    frame.append(1 << 3 | _WIRE_LEN)
    _varint(frame, len(first) + len(events) + len(rest))
    FRAME.pack_into(frame, 0, len(frame) - FRAME.size + len(first) + len(events) + len(rest))
    return b"".join((frame, first, events, rest))


def _markers(out: bytearray, fragment: int, rows: list[dict[str, Any]]) -> None:
    """Appends the marker rows of fragment `fragment` as Batch.markers fields: through
    protobuf, which refuses a column frames.proto does not know."""
    for m in rows:
        try:
            msg = Marker(fragment=fragment, **m).SerializeToString()
        except (ValueError, TypeError) as exc:  # a column frames.proto does not know
            raise WireError(f"marker row {m!r} does not fit frames.proto: {exc}") from None
        out.append(7 << 3 | _WIRE_LEN)
        _varint(out, len(msg))
        out += msg


def collapse_watermarks(items: list[Fragment | Watermark]) -> list[Fragment | Watermark]:
    """The items of one frame as MergeJoint needs them: every fragment, in order, and of the
    watermarks only the last one and the last one carrying a checkpoint. A frame is one batch
    for MergeJoint, which pushes a batch's fragments before its watermarks and keeps only the
    last watermark and the last checkpoint of each DN per drain (an older one would only be an
    earlier restart point), so the others are not worth encoding and decoding: a MergeSource
    sends about one watermark per fragment."""
    last = last_cp = None
    out: list[Fragment | Watermark] = []
    for item in items:
        if type(item) is Watermark:
            last = item
            if item.checkpoint is not None:
                last_cp = item
        else:
            out.append(item)
    if last_cp is not None and last_cp is not last:
        out.append(last_cp)
    if last is not None:
        out.append(last)
    return out


def encode_status(status: dict[str, Any]) -> bytes:
    frame = Frame()
    frame.status.SetInParent()  # a status of all defaults is still a status
    for name, value in status.items():
        if value is not None:
            setattr(frame.status, name, value)
    return framed(frame)


def encode_error(text: str) -> bytes:
    return framed(Frame(fatal_error=text))


class Status(dict):
    """A status frame: `MergeSource.status()` as the source process last sent it."""


class FatalError(str):
    """A fatal-error frame: why the MergeSource stopped (the last frame of its process)."""


def decode_body(body: bytes) -> list[Fragment | Watermark] | Status | FatalError:
    """What one frame body (without its length prefix) holds: a batch, a status or an error."""
    try:
        # a batch as `encode_batch` lays it out: read in C, no protobuf message built
        out = read_batch_frame(body) if type(body) is bytes else None
        if out is not None:
            return out
        frame = Frame.FromString(body)
        which = frame.WhichOneof("body")
        if which == "batch":
            out = []
            _read_batch(frame.batch, out)
            return out
        if which == "status":
            s = frame.status
            return Status(
                (f.name, getattr(s, f.name) if not f.has_presence or s.HasField(f.name) else None)
                for f in s.DESCRIPTOR.fields
            )
        if which == "fatal_error":
            return FatalError(frame.fatal_error)
        raise ValueError("an empty frame")
    except (DecodeError, struct.error, IndexError, ValueError, KeyError) as exc:
        raise WireError(f"undecodable MergeSource frame ({len(body)} bytes): {exc}") from None


def check_events(body: bytes) -> None:  # C types: wire.pxd
    """That the events concatenated in `body` add up to it (each carries its size in its
    header): the leader keeps a statement as these bytes (`Statement.packed`), split by its
    encoder as it copies them out, so a size that overruns is found here, at the frame."""
    pos = 0
    stop = len(body)
    p = body  # C: the bytes' buffer
    while pos < stop:
        if stop - pos < constants.HEADER_LEN:
            raise ValueError(f"{stop - pos} stray bytes at {pos} end the statement")
        n = header.event_size(p, pos)
        if n < constants.HEADER_LEN or pos + n > stop:
            raise ValueError(f"event size {n} at {pos} overruns its statement")
        pos += n


def _read_batch(b, out: list) -> None:  # C types: wire.pxd
    dn = b.dn
    head = b.fragments[:]  # each column once, as a list (slicing a container: one C call)
    parts = b.participants[:]
    events = b.statement_events[:]
    stmts = b.statements[:]
    n = len(head) // FRAGMENT_FIELDS
    m = len(events)
    if n * FRAGMENT_FIELDS != len(head) or len(stmts) != 3 * m:
        raise ValueError("the batch's fragment or statement columns do not add up")
    spilled = {s.statement: s for s in b.spilled} if len(b.spilled) else None
    adopted: dict[str, SpillFile] = {}
    first = len(out)
    p = 0  # into parts
    j = 0  # into the statements
    for i in range(0, n * FRAGMENT_FIELDS, FRAGMENT_FIELDS):
        c = head[i + 6]
        if p + c > len(parts):
            raise ValueError("participants run past their column")
        participants = tuple(parts[p : p + c])
        p += c
        c = head[i + 7]
        if j + c > m:
            raise ValueError("statements run past their columns")
        statements = []
        end = j + c
        while j < end:
            trace = (stmts[3 * j + 1], stmts[3 * j + 2]) if stmts[3 * j] else None
            if spilled is not None and j in spilled:
                s = spilled[j]
                spill = adopted.get(s.path)
                if spill is None:
                    spill = adopted[s.path] = SpillFile.adopt(s.path)
                span = EventSpan(spill, s.start, s.start + s.size, s.count)
                statements.append(Statement(trace, span=span))
            else:
                data = events[j]
                check_events(data)
                statements.append(Statement(trace, None, None, data))  # packed: no split
            j += 1
        key = named_tuple.new3(SortKey, head[i], SORT_KINDS[head[i + 1]], head[i + 2])
        kind = KINDS[head[i + 4]]
        out.append(Fragment(key, dn, head[i + 3], participants, kind, statements, [], head[i + 5]))
    if j != m or p != len(parts):
        raise ValueError("the batch holds statements or participants of no fragment")
    if len(b.markers):
        for mk in b.markers:
            row = {f.name: v for f, v in mk.ListFields() if f.name != "fragment"}
            out[first + mk.fragment].markers.append(row)
    marks = b.watermarks[:]
    if len(marks) % 3:
        raise ValueError("the batch's watermark column does not add up")
    checkpoints = {ck.watermark: ck for ck in b.checkpoints} if len(b.checkpoints) else None
    for i in range(0, len(marks), 3):
        cp = None
        if checkpoints is not None and i // 3 in checkpoints:
            ck = checkpoints.pop(i // 3)
            cp = Checkpoint(stream_name(dn), ck.file, ck.pos, ck.max_tso_seen)
        key = named_tuple.new3(SortKey, marks[i], SORT_KINDS[marks[i + 1]], marks[i + 2])
        out.append(Watermark(dn, key, cp))
    if checkpoints:
        raise ValueError("the batch holds checkpoints of no watermark")


# The batch frame read straight from its bytes (protobuf's wire format, frames.proto's field
# numbers): the leader decodes one per MergeSource batch, and protobuf's message objects cost it
# more than the rest of the decode (a Python int per column entry, a bytes value and a container
# per statement, before any Fragment is built). The reader takes the layout `encode_batch` writes
# (each packed column one run, the statements' events consecutive, no spilled statement or
# marker, no field frames.proto does not know); for anything else `decode_body` asks protobuf,
# which decodes any valid encoding and words the errors, so the two never disagree on a frame.
_FRAME_BATCH = 1 << 3 | 2  # Frame.batch: field 1, length-delimited
_EVENTS_TAG = 4 << 3 | 2  # Batch.statement_events: one per statement


class _OtherLayout(Exception):
    """The frame is not laid out as `encode_batch` writes it: protobuf decodes it."""


class _Cursor:
    """A read position in a frame's bytes up to `end` (C types: wire.pxd)."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int, end: int):
        self.data = data
        self.pos = pos
        self.end = end

    def varint(self):
        """The next base-128 varint (at most 64 bits)."""
        p = self.data
        pos = self.pos
        end = self.end
        value = 0
        shift = 0
        while True:
            if pos >= end:
                raise _OtherLayout("a varint runs past its field")
            b = p[pos]
            pos += 1
            if shift == 63 and b > 1:
                raise _OtherLayout("a varint past 64 bits")
            value |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        self.pos = pos
        return value

    def field(self, tag):
        """The next length-delimited field, which must be `tag`, as bytes."""
        if self.varint() != tag:
            raise _OtherLayout("the events of the statements are not consecutive")
        n = self.varint()
        start = self.pos
        if n > self.end - start:
            raise _OtherLayout("a field runs past its message")
        stop = start + n
        self.pos = stop
        p = self.data  # C: the bytes' buffer, sliced into one new bytes object (no slice object)
        return p[start:stop]


def _varint_count(data, start, end):  # C types: wire.pxd
    """How many varints the packed column data[start:end] holds (bytes ending one)."""
    p = data
    n = 0
    i = start
    while i < end:
        if p[i] < 0x80:
            n += 1
        i += 1
    if end > start and p[end - 1] >= 0x80:
        raise _OtherLayout("a packed column ends inside a varint")
    return n


def read_batch_frame(body: bytes) -> list[Fragment | Watermark] | None:
    """The items of a batch frame's body laid out as `encode_batch` writes it, or None for any
    other frame (a status, an error, another layout): `_read_batch`'s result, without protobuf."""
    if len(body) < 2 or body[0] != _FRAME_BATCH:
        return None
    try:
        r = _Cursor(body, 1, len(body))
        n = r.varint()
        if n != r.end - r.pos:
            return None  # something follows the batch: protobuf's rules decide what counts
        return _batch_items(body, r.pos, r.end)
    except _OtherLayout:
        return None


def _batch_items(body, start, stop):  # C types: wire.pxd
    """The Batch message body[start:stop]: its columns located in one pass, then read in order."""
    dn = 0
    frag_s = frag_e = part_s = part_e = stmt_s = stmt_e = mark_s = mark_e = -1
    ev_s = ev_e = -1
    m = 0  # statement_events entries
    cps: list = []  # Checkpoint messages: one a batch at most, usually
    r = _Cursor(body, start, stop)
    prev = 0
    while r.pos < stop:
        at = r.pos
        tag = r.varint()
        field = tag >> 3
        if tag == 1 << 3:  # dn, a varint
            dn = r.varint() & 0xFFFFFFFF  # a uint32: its low 32 bits, as protobuf reads it
            prev = field
            continue
        if tag & 7 != 2:
            return None
        n = r.varint()
        s = r.pos
        if n > stop - s:
            return None
        e = s + n
        r.pos = e
        if field == 4:
            if m and prev != 4:
                return None
            if not m:
                ev_s = at
            ev_e = e
            m += 1
        elif field == 2 and frag_s < 0:
            frag_s, frag_e = s, e
        elif field == 3 and part_s < 0:
            part_s, part_e = s, e
        elif field == 5 and stmt_s < 0:
            stmt_s, stmt_e = s, e
        elif field == 8 and mark_s < 0:
            mark_s, mark_e = s, e
        elif field == 9:
            cps.append(CheckpointMessage.FromString(body[s:e]))
        else:  # spilled statements, markers (rare), a column split in runs, an unknown field
            return None
        prev = field
    nh = _varint_count(body, frag_s, frag_e) if frag_s >= 0 else 0
    np = _varint_count(body, part_s, part_e) if part_s >= 0 else 0
    ns = _varint_count(body, stmt_s, stmt_e) if stmt_s >= 0 else 0
    nm = _varint_count(body, mark_s, mark_e) if mark_s >= 0 else 0
    nf = nh // FRAGMENT_FIELDS
    if nf * FRAGMENT_FIELDS != nh or ns != 3 * m:
        raise ValueError("the batch's fragment or statement columns do not add up")
    head = _Cursor(body, frag_s, frag_e)
    parts = _Cursor(body, part_s, part_e)
    stmts = _Cursor(body, stmt_s, stmt_e)
    events = _Cursor(body, ev_s, ev_e)
    out: list = []
    p = 0  # participants read
    j = 0  # statements read
    for _k in range(nf):
        tso = head.varint()
        sort_kind = head.varint()
        seq = head.varint()
        txn_id = head.varint()
        kind = head.varint()
        timestamp = head.varint()
        c = head.varint()
        if c > np - p:
            raise ValueError("participants run past their column")
        participants = tuple([parts.varint() & 0xFFFFFFFF for _k in range(c)])
        p += c
        c = head.varint()
        if c > m - j:
            raise ValueError("statements run past their columns")
        statements = []
        for _k in range(c):
            has_trace = stmts.varint()
            trace_seq = stmts.varint()
            trace_sub = stmts.varint()
            data = events.field(_EVENTS_TAG)
            check_events(data)
            st = Statement.__new__(Statement)  # packed: the constructor's defaults, set in C
            st.trace_id = (trace_seq, trace_sub) if has_trace else None
            st.in_memory = None
            st.span = None
            st.packed = data
            statements.append(st)
        j += c
        key = named_tuple.new3(SortKey, tso, SORT_KINDS[sort_kind], seq)
        out.append(
            new_fragment(key, dn, txn_id, participants, KINDS[kind], statements, [], timestamp)
        )
    if j != m or p != np:
        raise ValueError("the batch holds statements or participants of no fragment")
    if nm % 3:
        raise ValueError("the batch's watermark column does not add up")
    checkpoints = {ck.watermark: ck for ck in cps} if cps else None
    marks = _Cursor(body, mark_s, mark_e)
    for i in range(nm // 3):
        cp = None
        if checkpoints is not None and i in checkpoints:
            ck = checkpoints.pop(i)
            cp = Checkpoint(stream_name(dn), ck.file, ck.pos, ck.max_tso_seen)
        tso = marks.varint()
        sort_kind = marks.varint()
        seq = marks.varint()
        out.append(Watermark(dn, named_tuple.new3(SortKey, tso, SORT_KINDS[sort_kind], seq), cp))
    if checkpoints:
        raise ValueError("the batch holds checkpoints of no watermark")
    return out
