"""The frames between a MergeSource process and the leader (MergeJoint), as protobuf messages.

The contract is `frames.proto` (its comments say what each field means); this module turns
fragments and watermarks into those messages and back. A frame is `u32 length` + one serialized
`Frame`: a batch, a status, or a fatal error (the last one the process sends).

A batch is columns (a packed repeated field per fragment attribute, one `bytes` value per
statement with its events concatenated): the leader reads a handful of fields per batch, not
several per fragment, and splits each statement into events in compiled code (every event
carries its size at header offset 9). A statement spilled to disk does not cross the pipe: the
sender copies it into a handoff file and sends its path, the receiver adopts the file
(`spill.write_handoff` / `SpillFile.adopt`), so a 1 GB transaction never sits in either
process's memory.
"""

from __future__ import annotations

import struct
from typing import Any

from google.protobuf.message import DecodeError

from cdc.keys import Checkpoint, Kind, SortKey, stream_name
from merge_source.fragment import Fragment, FragmentKind, Statement, Watermark
from merge_source.frames_pb2 import Frame, Marker
from merge_source.spill import EventSpan, SpillFile, write_handoff

FRAME = struct.Struct("<I")
MAX_FRAME = 1 << 30
KINDS = list(FragmentKind)  # by position, as the proto's enum FragmentKind
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
_DATA = FragmentKind.DATA
assert KIND_CODE[_DATA] == 0
SORT_KINDS = tuple(Kind)  # by value (BRANCH 0, LOCAL 1): an index, not an Enum call per record
MARKER_FIELDS = tuple(f.name for f in Marker.DESCRIPTOR.fields if f.name != "fragment")
# SortKey(...) runs the NamedTuple's interpreted __new__; tuple.__new__ builds the same key in C
# (a third of the cost, once per record).
_new_tuple = tuple.__new__
# An instance without running its __init__ (every field is set right after): fragments,
# statements and watermarks are decoded by the thousand.
_new_object = object.__new__


class WireError(RuntimeError):
    """A frame that does not decode: the MergeSource process and this one disagree."""


def _framed(frame: Frame) -> bytes:
    body = frame.SerializeToString()
    return FRAME.pack(len(body)) + body


def encode_batch(items: list[Fragment | Watermark], spill_dir: str | None = None) -> bytes:
    """One frame of `items`, all of one DN. The receiver gets the fragments in order, then the
    watermarks in order (what MergeJoint does with a batch anyway)."""
    frame = Frame()
    _batch(frame.batch, items, spill_dir)
    return _framed(frame)


def _batch(b, items: list, spill_dir) -> None:  # C types: wire.pxd
    tso, sort_kind, seq, txn_id, kind, timestamp = [], [], [], [], [], []
    n_parts, parts, n_stmts = [], [], []
    events, has_trace, trace_seq, trace_subseq = [], [], [], []
    dn = -1
    i = 0  # fragment index
    for item in items:
        if dn != item.dn:
            if dn != -1:
                raise WireError(f"one batch holds DN {dn} and DN {item.dn}")
            dn = item.dn
        if type(item) is Watermark:
            w = b.watermarks.add(tso=item.key[0], sort_kind=item.key[1], seq=item.key[2])
            cp = item.checkpoint
            if cp is not None:
                # its stream is the watermark's DN: not sent
                w.checkpoint.file, w.checkpoint.pos, w.checkpoint.max_tso_seen = cp[1:]
            continue
        f: Fragment = item
        k = f.key
        tso.append(k[0])  # tso, kind, seq: a SortKey read by index (no attribute lookups)
        sort_kind.append(k[1])
        seq.append(k[2])
        txn_id.append(f.txn_id)
        kind.append(0 if f.kind is _DATA else KIND_CODE[f.kind])  # an Enum's hash runs Python
        timestamp.append(f.timestamp)
        n_parts.append(len(f.participants))
        parts.extend(f.participants)
        statements = f.statements
        n_stmts.append(len(statements))
        handoff = None  # spilled statements: copied to a handoff file when the first one comes
        for st in statements:
            trace = st.trace_id
            if trace is None:
                has_trace.append(False)
                trace_seq.append(0)
                trace_subseq.append(0)
            else:
                has_trace.append(True)
                trace_seq.append(trace[0])
                trace_subseq.append(trace[1])
            if st.span is None:
                events.append(b"".join(st._events))  # in memory: the list itself, no copy
                continue
            if handoff is None:
                spilled = [s.span for s in statements if s.span is not None]
                path, starts = write_handoff(spilled, spill_dir)
                handoff = iter(zip(starts, spilled, strict=True))
            start, span = next(handoff)
            b.spilled.add(
                statement=len(events), path=path, start=start, size=span.size, count=span.count
            )
            events.append(b"")
        for m in f.markers:
            try:
                b.markers.add(fragment=i, **m)
            except (ValueError, TypeError) as exc:  # a column frames.proto does not know
                raise WireError(f"marker row {m!r} does not fit frames.proto: {exc}") from None
        i += 1
    b.dn = max(dn, 0)
    b.tso.extend(tso)
    b.sort_kind.extend(sort_kind)
    b.seq.extend(seq)
    b.txn_id.extend(txn_id)
    b.kind.extend(kind)
    b.timestamp.extend(timestamp)
    b.participant_count.extend(n_parts)
    b.participants.extend(parts)
    b.statement_count.extend(n_stmts)
    b.statement_events.extend(events)
    b.has_trace.extend(has_trace)
    b.trace_seq.extend(trace_seq)
    b.trace_subseq.extend(trace_subseq)


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
    return _framed(frame)


def encode_error(text: str) -> bytes:
    return _framed(Frame(fatal_error=text))


class Status(dict):
    """A status frame: `MergeSource.status()` as the source process last sent it."""


class FatalError(str):
    """A fatal-error frame: why the MergeSource stopped (the last frame of its process)."""


def decode_body(body: bytes) -> list[Fragment | Watermark] | Status | FatalError:
    """What one frame body (without its length prefix) holds: a batch, a status or an error."""
    try:
        frame = Frame.FromString(body)
        which = frame.WhichOneof("body")
        if which == "batch":
            out: list = []
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


def statement_events(body: bytes, pos, stop) -> list:  # C types: wire.pxd
    """The events concatenated in `body[pos:stop]` (each carries its size at header offset 9)."""
    events = []
    p = body  # C: the bytes' buffer
    while pos < stop:
        if stop - pos < 19:
            raise ValueError(f"{stop - pos} stray bytes at {pos} end the statement")
        n = p[pos + 9] | p[pos + 10] << 8 | p[pos + 11] << 16 | p[pos + 12] << 24
        if n < 19 or pos + n > stop:
            raise ValueError(f"event size {n} at {pos} overruns its statement")
        events.append(p[pos : pos + n])  # compiled: bytes straight from the buffer
        pos += n
    return events


def _read_batch(b, out: list) -> None:  # C types: wire.pxd
    dn = b.dn
    tso = list(b.tso)  # each column once, as a list (a container's items cost more)
    sort_kind, seq, txn_id = list(b.sort_kind), list(b.seq), list(b.txn_id)
    kind, timestamp = list(b.kind), list(b.timestamp)
    n_parts, parts, n_stmts = (
        list(b.participant_count),
        list(b.participants),
        list(b.statement_count),
    )
    events, has_trace = list(b.statement_events), list(b.has_trace)
    trace_seq, trace_subseq = list(b.trace_seq), list(b.trace_subseq)
    n = len(tso)
    m = len(events)
    if not (
        len(sort_kind) == len(seq) == len(txn_id) == len(kind) == n
        and len(timestamp) == len(n_parts) == len(n_stmts) == n
        and len(has_trace) == len(trace_seq) == len(trace_subseq) == m
    ):
        raise ValueError("the batch's columns differ in length")
    spilled = {s.statement: s for s in b.spilled} if len(b.spilled) else None
    adopted: dict[str, SpillFile] = {}
    first = len(out)
    p = 0  # into parts
    j = 0  # into the statement columns
    for i in range(n):
        c = n_parts[i]
        if p + c > len(parts):
            raise ValueError("participants run past their column")
        participants = tuple(parts[p : p + c])
        p += c
        c = n_stmts[i]
        if j + c > m:
            raise ValueError("statements run past their columns")
        statements = []
        end = j + c
        while j < end:
            trace = (trace_seq[j], trace_subseq[j]) if has_trace[j] else None
            if spilled is not None and j in spilled:
                s = spilled[j]
                spill = adopted.get(s.path)
                if spill is None:
                    spill = adopted[s.path] = SpillFile.adopt(s.path)
                span = EventSpan(spill, s.start, s.start + s.size, s.count)
                statements.append(Statement(trace, span=span))
            else:
                data = events[j]
                st = _new_object(Statement)  # field by field, as the fragment below
                st.trace_id = trace
                st._events = statement_events(data, 0, len(data))
                st.span = None
                statements.append(st)
            j += 1
        # Field by field: the dataclass's __init__ is interpreted (a Python frame per fragment).
        frag = _new_object(Fragment)
        frag.key = _new_tuple(SortKey, (tso[i], SORT_KINDS[sort_kind[i]], seq[i]))
        frag.dn = dn
        frag.txn_id = txn_id[i]
        frag.participants = participants
        frag.kind = KINDS[kind[i]]
        frag.statements = statements
        frag.markers = []
        frag.timestamp = timestamp[i]
        out.append(frag)
    if j != m or p != len(parts):
        raise ValueError("the batch holds statements or participants of no fragment")
    for mk in b.markers:
        row = {f.name: v for f, v in mk.ListFields() if f.name != "fragment"}
        out[first + mk.fragment].markers.append(row)
    for w in b.watermarks:
        cp = None
        if w.HasField("checkpoint"):
            ck = w.checkpoint
            cp = Checkpoint(stream_name(dn), ck.file, ck.pos, ck.max_tso_seen)
        mark = _new_object(Watermark)  # field by field: its __init__ is interpreted
        mark.dn = dn
        mark.key = _new_tuple(SortKey, (w.tso, SORT_KINDS[w.sort_kind], w.seq))
        mark.checkpoint = cp
        out.append(mark)
