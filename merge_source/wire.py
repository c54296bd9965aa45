"""The framing between a MergeSource process and MergeJoint: batches of fragments and watermarks.

One frame is `u32 length` + records. Event bytes travel as they are, concatenated: a binlog
event carries its own size at header offset 9, so a statement needs no index and the reader
splits it with one unpack per event. Only marker rows (rare, small) are pickled. A statement
spilled to disk does not cross the pipe: the sender copies it into a handoff file and sends its
path, the receiver adopts the file (`spill.write_handoff` / `SpillFile.adopt`), so a 1 GB
transaction never sits in either process's memory.

Records (first byte):
  F fragment   W watermark   S status (JSON)   E fatal error (UTF-8 text, the last record)
"""

from __future__ import annotations

import json
import pickle
import struct
from typing import Any

from cdc.keys import Checkpoint, Kind, SortKey, stream_name
from merge_source.fragment import Fragment, FragmentKind, Statement, Watermark
from merge_source.spill import EventSpan, SpillFile, write_handoff

FRAME = struct.Struct("<I")
MAX_FRAME = 1 << 30
_FRAG = struct.Struct(
    "<cQBQQBIHIH"
)  # tag, tso, key kind, seq, txn_id, kind, ts, dn, #stmts, #parts
_STMT = struct.Struct("<BQQIQ")  # flags, trace seq, trace subseq, #events, bytes
_SPILLED = struct.Struct("<QH")  # start in the handoff file, path length
_MARKERS = struct.Struct("<I")
_NO_MARKERS = _MARKERS.pack(0)
_WM = struct.Struct("<cQBQHB")  # tag, tso, key kind, seq, dn, has checkpoint
_CP = struct.Struct("<QQH")  # pos, max tso seen, file name length
_TEXT = struct.Struct("<cI")
_PART = struct.Struct("<I")
_PARTS = [struct.Struct(f"<{n}I") for n in range(17)]  # a fragment's participant list, by count

HAS_TRACE, SPILLED = 1, 2
KINDS = list(FragmentKind)
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
_DATA = FragmentKind.DATA
assert KIND_CODE[_DATA] == 0
SORT_KINDS = tuple(Kind)  # by value (BRANCH 0, LOCAL 1): an index, not an Enum call per record
# SortKey(...) runs the NamedTuple's interpreted __new__; tuple.__new__ builds the same key in C
# (a third of the cost, once per record).
_new_tuple = tuple.__new__
# An instance without running its __init__ (every field is set right after): fragments,
# statements and watermarks are decoded by the thousand.
_new_object = object.__new__


class WireError(RuntimeError):
    """A frame that does not decode: the MergeSource process and this one disagree."""


def encode_batch(items: list[Fragment | Watermark], spill_dir: str | None = None) -> bytes:
    parts: list[bytes] = [b""]
    for item in items:
        if type(item) is Watermark:
            _watermark(parts, item)
        else:
            _fragment(parts, item, spill_dir)  # type: ignore[arg-type]
    body = b"".join(parts)
    return FRAME.pack(len(body)) + body


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


def encode_text(tag: bytes, text: str) -> bytes:
    data = text.encode()
    body = _TEXT.pack(tag, len(data)) + data
    return FRAME.pack(len(body)) + body


def encode_status(status: dict[str, Any]) -> bytes:
    return encode_text(b"S", json.dumps(status))


def _watermark(parts: list[bytes], w: Watermark) -> None:
    cp: Checkpoint | None = w.checkpoint  # its stream is the watermark's DN: not sent
    parts.append(_WM.pack(b"W", w.key.tso, w.key.kind, w.key.seq, w.dn, cp is not None))
    if cp is not None:
        name = cp.file.encode()
        parts.append(_CP.pack(cp.position, cp.max_tso_seen, len(name)))
        parts.append(name)


def _fragment(parts: list[bytes], f: Fragment, spill_dir: str | None) -> None:
    k = f.key
    participants = f.participants
    statements = f.statements
    n = len(participants)
    head = _FRAG.pack(
        b"F",
        k[0],  # tso, kind, seq: a SortKey read by index (no attribute lookups)
        k[1],
        k[2],
        f.txn_id,
        0 if f.kind is _DATA else KIND_CODE[f.kind],  # an Enum's hash runs Python code
        f.timestamp,
        f.dn,
        len(statements),
        n,
    )
    if n:
        if n < len(_PARTS):
            head += _PARTS[n].pack(*participants)  # with the header: one part less
        else:
            parts.append(head)
            head = b"".join(_PART.pack(p) for p in participants)
    parts.append(head)
    handoff = None  # spilled statements: copied to a handoff file when the first one comes
    append = parts.append
    for st in statements:
        trace = st.trace_id
        flags = HAS_TRACE if trace is not None else 0
        a, b = trace if trace is not None else (0, 0)
        if st.span is None:
            events = st._events  # in memory here: the list itself, no copy
            data = b"".join(events)
            append(_STMT.pack(flags, a, b, len(events), len(data)))
            append(data)
        else:
            if handoff is None:
                spilled = [s.span for s in statements if s.span is not None]
                path, starts = write_handoff(spilled, spill_dir)
                handoff = iter(zip(starts, spilled, strict=True))
                name = path.encode()
            start, span = next(handoff)
            append(_STMT.pack(flags | SPILLED, a, b, span.count, span.size))
            append(_SPILLED.pack(start, len(name)))
            append(name)
    if f.markers:
        markers = pickle.dumps(f.markers, protocol=pickle.HIGHEST_PROTOCOL)
        append(_MARKERS.pack(len(markers)))
        append(markers)
    else:
        append(_NO_MARKERS)


class Record:
    """A status or error record of a frame (fragments and watermarks are returned as such)."""

    __slots__ = ("tag", "text")

    def __init__(self, tag: bytes, text: str):
        self.tag, self.text = tag, text

    def json(self) -> dict[str, Any]:
        return json.loads(self.text)


def decode_body(body: bytes) -> list[Fragment | Watermark | Record]:
    """The records of one frame body (without its length prefix)."""
    out: list[Fragment | Watermark | Record] = []
    try:
        _records(body, out)  # appends (a generator's resume per record cost more)
    except (struct.error, IndexError, ValueError, KeyError, pickle.UnpicklingError) as exc:
        raise WireError(f"undecodable MergeSource frame ({len(body)} bytes): {exc}") from None
    return out


def _records(body: bytes, out: list) -> None:  # C types: wire.pxd
    pos, end = 0, len(body)
    view = memoryview(body)
    append = out.append
    while pos < end:
        tag = body[pos : pos + 1]
        if tag == b"F":
            frag, pos = _read_fragment(body, view, pos)
            append(frag)
        elif tag == b"W":
            _, tso, kind, seq, dn, has_cp = _WM.unpack_from(body, pos)
            pos += _WM.size
            cp = None
            if has_cp:
                cp_pos, max_tso, n = _CP.unpack_from(body, pos)
                pos += _CP.size
                cp = Checkpoint(stream_name(dn), body[pos : pos + n].decode(), cp_pos, max_tso)
                pos += n
            mark = _new_object(Watermark)  # field by field: its __init__ is interpreted
            mark.dn = dn
            mark.key = _new_tuple(SortKey, (tso, SORT_KINDS[kind], seq))
            mark.checkpoint = cp
            append(mark)
        elif tag in (b"S", b"E"):
            _, n = _TEXT.unpack_from(body, pos)
            pos += _TEXT.size
            append(Record(tag, body[pos : pos + n].decode()))
            pos += n
        else:
            raise ValueError(f"unknown record tag {tag!r} at {pos}")
        if pos > end:
            raise ValueError(f"the last record runs {pos - end} bytes past the frame's end")


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


def _read_fragment(body: bytes, view, pos) -> tuple:  # C types: wire.pxd
    _, tso, kkind, seq, txn_id, kind, ts, dn, n_st, n_p = _FRAG.unpack_from(body, pos)
    pos += _FRAG.size
    if n_p < len(_PARTS):
        participants = _PARTS[n_p].unpack_from(body, pos)
    else:
        participants = struct.unpack_from(f"<{n_p}I", body, pos)
    pos += 4 * n_p
    statements = []
    adopted: dict[bytes, SpillFile] | None = None
    for _ in range(n_st):
        flags, a, b, count, size = _STMT.unpack_from(body, pos)
        pos += _STMT.size
        trace = (a, b) if flags & HAS_TRACE else None
        if flags & SPILLED:
            start, n = _SPILLED.unpack_from(body, pos)
            pos += _SPILLED.size
            path = body[pos : pos + n]
            pos += n
            if adopted is None:
                adopted = {}
            spill = adopted.get(path)
            if spill is None:
                spill = adopted[path] = SpillFile.adopt(path.decode())
            statements.append(Statement(trace, span=EventSpan(spill, start, start + size, count)))
            continue
        events = statement_events(body, pos, pos + size)
        pos += size
        if len(events) != count:
            raise ValueError(f"statement holds {len(events)} events, header says {count}")
        st = _new_object(Statement)  # field by field, as the fragment below
        st.trace_id = trace
        st._events = events
        st.span = None
        statements.append(st)
    (n,) = _MARKERS.unpack_from(body, pos)
    pos += _MARKERS.size
    markers = pickle.loads(view[pos : pos + n]) if n else []
    pos += n
    key = _new_tuple(SortKey, (tso, SORT_KINDS[kkind], seq))
    # Field by field: the dataclass's __init__ is interpreted (a Python frame per fragment).
    frag = _new_object(Fragment)
    frag.key = key
    frag.dn = dn
    frag.txn_id = txn_id
    frag.participants = participants
    frag.kind = KINDS[kind]
    frag.statements = statements
    frag.markers = markers
    frag.timestamp = ts
    return frag, pos
