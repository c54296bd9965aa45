"""MySQL GTIDs: `GtidSet` (text `uuid:1-5:7,uuid2:3` and the binary form that PREVIOUS_GTIDS and
COM_BINLOG_DUMP_GTID carry), and where the fields sit in a raw GTID event (type 33), whose
5.7 layout the global binlog writes.

A set is kept as, per 16-byte sid, sorted disjoint intervals `[start, end)` (end exclusive,
as on the wire), so that `uuid:1-5` is `{sid: ((1, 6),)}`."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping

from .constants import HEADER_LEN
from .errors import CodecError

# A GTID event in the 5.7 layout: flags (1), sid (16), gno (8), lt_type (1),
# last_committed (8), sequence_number (8). MySQL 8 appends optional fields; we write none.
GTID_BODY_LEN = 42
GTID_FLAGS_OFFSET = HEADER_LEN
GTID_SID_OFFSET = HEADER_LEN + 1
GTID_GNO_OFFSET = HEADER_LEN + 17
GTID_LT_OFFSET = HEADER_LEN + 25  # lt_type, then last_committed and sequence_number
LT_TYPE_LOGICAL = 2  # LOGICAL_TIMESTAMP_TYPECODE
GTID_COMMIT_FLAG = 1  # the transaction may be applied in parallel with its lt-peers

_U64 = struct.Struct("<Q")
_IV = struct.Struct("<QQ")
MAX_GNO = (1 << 63) - 1


def sid_of(text: str) -> bytes:
    """`'3e11fa47-71ca-11e1-9e33-c80aa9429562'` → 16 bytes; CodecError when it is no UUID."""
    try:
        return uuid.UUID(text.strip()).bytes
    except ValueError:
        raise CodecError(f"malformed GTID set: {text.strip()!r} is not a UUID") from None


def uuid_text(sid: bytes) -> str:
    return str(uuid.UUID(bytes=bytes(sid)))


class GtidSet:
    """An immutable set of GTIDs."""

    __slots__ = ("_sids",)

    def __init__(self, sids: Mapping[bytes, Iterable[tuple[int, int]]] | None = None) -> None:
        self._sids: dict[bytes, tuple[tuple[int, int], ...]] = {}
        for sid, ivs in (sids or {}).items():
            merged = _merge(ivs)
            if merged:
                self._sids[bytes(sid)] = merged

    @classmethod
    def upto(cls, sid: bytes, gno: int) -> GtidSet:
        """`sid:1-gno` (empty when gno is 0)."""
        return cls({sid: ((1, gno + 1),)} if gno > 0 else {})

    # -- text -----------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """MySQL's text form: `uuid:1-5:7-9,uuid2:3` (whitespace and newlines allowed)."""
        sids: dict[bytes, list[tuple[int, int]]] = {}
        text = "".join(text.split())
        if not text:
            return cls()
        for part in text.split(","):
            fields = part.split(":")
            if len(fields) < 2:
                raise CodecError(f"malformed GTID set: {part!r} has no interval")
            sid = sid_of(fields[0])
            for field in fields[1:]:
                lo, _, hi = field.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    raise CodecError(f"malformed GTID set: bad interval {field!r} in {part!r}")
                start, last = int(lo), int(hi or lo)
                if not 1 <= start <= last <= MAX_GNO:
                    raise CodecError(f"malformed GTID set: bad interval {field!r} in {part!r}")
                sids.setdefault(sid, []).append((start, last + 1))
        return cls(sids)

    def __str__(self) -> str:
        parts = []
        for sid in sorted(self._sids, key=uuid_text):
            ivs = ":".join(str(s) if e - s == 1 else f"{s}-{e - 1}" for s, e in self._sids[sid])
            parts.append(f"{uuid_text(sid)}:{ivs}")
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"GtidSet({str(self)!r})"

    # -- binary (PREVIOUS_GTIDS body, COM_BINLOG_DUMP_GTID data) ---------------------------------
    @classmethod
    def decode(cls, data: bytes | memoryview) -> GtidSet:
        mv = memoryview(data)
        if len(mv) < 8:
            raise CodecError(f"GTID set of {len(mv)} bytes: no sid count")
        (n,) = _U64.unpack_from(mv, 0)
        pos = 8
        if n * 24 > len(mv) - pos:
            raise CodecError(f"GTID set claims {n} sids in {len(mv)} bytes")
        sids: dict[bytes, list[tuple[int, int]]] = {}
        for _ in range(n):
            if len(mv) - pos < 24:
                raise CodecError("GTID set ends inside a sid")
            sid = bytes(mv[pos : pos + 16])
            (count,) = _U64.unpack_from(mv, pos + 16)
            pos += 24
            if count * 16 > len(mv) - pos:
                raise CodecError(f"GTID set claims {count} intervals in {len(mv) - pos} bytes")
            for _ in range(count):
                start, end = _IV.unpack_from(mv, pos)
                pos += 16
                if not 1 <= start < end <= MAX_GNO + 1:
                    raise CodecError(f"GTID set holds a bad interval [{start}, {end})")
                sids.setdefault(sid, []).append((start, end))
        return cls(sids)

    def encode(self) -> bytes:
        out = [_U64.pack(len(self._sids))]
        for sid, ivs in self._sids.items():
            out += [sid, _U64.pack(len(ivs)), *(_IV.pack(s, e) for s, e in ivs)]
        return b"".join(out)

    # -- queries --------------------------------------------------------------------------------
    def intervals(self, sid: bytes) -> tuple[tuple[int, int], ...]:
        return self._sids.get(sid, ())

    def sids(self) -> tuple[tuple[bytes, tuple[tuple[int, int], ...]], ...]:
        return tuple(self._sids.items())

    def prefix_end(self, sid: bytes) -> int:
        """The largest k with `sid:1-k` in the set (0 if `sid:1` is not)."""
        ivs = self._sids.get(sid, ())
        return ivs[0][1] - 1 if ivs and ivs[0][0] == 1 else 0

    def last(self, sid: bytes) -> int:
        """The largest gno of `sid` in the set (0 if none)."""
        ivs = self._sids.get(sid, ())
        return ivs[-1][1] - 1 if ivs else 0

    def missing(self, sid: bytes, last: int) -> GtidSet:
        """`sid:1-last` less what the set holds of it."""
        out, at = [], 1
        for s, e in self._sids.get(sid, ()):
            if s > at:
                out.append((at, min(s, last + 1)))
            at = max(at, e)
            if at > last:
                break
        if at <= last:
            out.append((at, last + 1))
        return GtidSet({sid: out})

    def __contains__(self, gtid: tuple[bytes, int]) -> bool:
        sid, gno = gtid
        return any(s <= gno < e for s, e in self._sids.get(sid, ()))

    def __bool__(self) -> bool:
        return bool(self._sids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidSet) and self._sids == other._sids

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._sids.items())))


def _merge(ivs: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for s, e in sorted((int(s), int(e)) for s, e in ivs if e > s):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return tuple(out)


def gtid_text(sid: bytes, gno: int) -> str:
    return f"{uuid_text(sid)}:{gno}"


def parse_gtid(text: str) -> tuple[bytes, int]:
    """One GTID `uuid:n`."""
    head, sep, tail = text.strip().rpartition(":")
    if not sep or not tail.isdigit() or not 1 <= int(tail) <= MAX_GNO:
        raise CodecError(f"malformed GTID {text.strip()!r} (expected uuid:number)")
    return sid_of(head), int(tail)
