"""Typed event bodies and the registry from type code to class. `decode_event` turns one raw
event into (header, body); `encode_event` builds header + body + CRC for output."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol

from .checksum import seal
from .constants import (
    BINLOG_CHECKPOINT_EVENT,
    CHECKSUM_LEN,
    HEADER_LEN,
    ROWS_QUERY_EVENT,
    ROWS_TYPES,
    EventFlag,
    EventType,
    MariadbGtidFlag,
)
from .errors import CodecError, NotSupportedError
from .fde import FormatDescription
from .header import EventHeader
from .packed import take
from .query import QueryEvent
from .rows import RowsEvent
from .table_map import TableMapEvent

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

Buffer = bytes | bytearray | memoryview


class Body(Protocol):
    def build(self) -> bytes: ...


@dataclass(slots=True)
class StopEvent:
    TYPE_CODE: ClassVar[int] = EventType.STOP

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> StopEvent:
        return cls()

    def build(self) -> bytes:
        return b""


@dataclass(slots=True)
class RotateEvent:
    TYPE_CODE: ClassVar[int] = EventType.ROTATE

    next_file: bytes
    position: int = 4

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> RotateEvent:
        head, pos = take(body, 0, 8, "ROTATE position")
        return cls(bytes(memoryview(body)[pos:]), _U64.unpack(head)[0])

    def build(self) -> bytes:
        return _U64.pack(self.position) + self.next_file


@dataclass(slots=True)
class XidEvent:
    TYPE_CODE: ClassVar[int] = EventType.XID

    xid: int

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> XidEvent:
        head, _ = take(body, 0, 8, "XID value")
        return cls(_U64.unpack(head)[0])

    def build(self) -> bytes:
        return _U64.pack(self.xid)


@dataclass(slots=True)
class HeartbeatEvent:
    """HEARTBEAT (27): the current file name; the header's log_pos is the position."""

    TYPE_CODE: ClassVar[int] = EventType.HEARTBEAT
    DEFAULT_FLAGS: ClassVar[int] = EventFlag.ARTIFICIAL

    log_file: bytes

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> HeartbeatEvent:
        return cls(bytes(body))

    def build(self) -> bytes:
        return self.log_file


CTS_PREFIX = b"CTS::"


@dataclass(slots=True)
class RowsQueryEvent:
    """ROWS_QUERY (29). Always written with LOG_EVENT_IGNORABLE_F: MariaDB rejects it otherwise."""

    TYPE_CODE: ClassVar[int] = EventType.ROWS_QUERY
    DEFAULT_FLAGS: ClassVar[int] = EventFlag.IGNORABLE

    query: bytes

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> RowsQueryEvent:
        # The first byte is a length truncated to 255; readers ignore it and take the rest.
        take(body, 0, 1, "ROWS_QUERY length byte")
        return cls(bytes(memoryview(body)[1:]))

    def build(self) -> bytes:
        return bytes((min(len(self.query), 255),)) + self.query

    @property
    def cts(self) -> int | None:
        return parse_cts(self.query)


class MarkCarrier(NamedTuple):
    """The event that carries the `CTS::` mark: its type code, header flags and where the
    text starts in the raw event (after the header and the carrier's length field)."""

    type_code: int
    flags: int
    text_at: int

    def length_field(self, text_len: int) -> bytes:
        """The body's bytes before the text (the builders' layout, for raw templates)."""
        if self.type_code == EventType.ROWS_QUERY:
            return bytes((min(text_len, 255),))
        return _U32.pack(text_len)

    def body(self, text: bytes) -> RowsQueryEvent | BinlogCheckpointEvent:
        """The codec body of a mark with this text."""
        if self.type_code == EventType.ROWS_QUERY:
            return RowsQueryEvent(text)
        return BinlogCheckpointEvent(text)


# The mysql flavour's carrier: ROWS_QUERY (29), flagged IGNORABLE, a length byte then the text.
ROWS_QUERY_MARK = MarkCarrier(ROWS_QUERY_EVENT, int(EventFlag.IGNORABLE), HEADER_LEN + 1)
# The mariadb flavour's: BINLOG_CHECKPOINT (161) in MariaDB's layout (a u32 length, then the
# "binlog file name", here the mark's text), flags 0 as MariaDB writes it. A MariaDB replica
# in GTID mode takes it for what it is, an event outside any group (`is_group_event` false),
# where a ROWS_QUERY after a group's end stops its I/O thread (docs/dumper.md, "Flavours").
CHECKPOINT_MARK = MarkCarrier(BINLOG_CHECKPOINT_EVENT, 0, HEADER_LEN + 4)
MARK_CARRIERS = {c.type_code: c for c in (ROWS_QUERY_MARK, CHECKPOINT_MARK)}


def cts_text(tso: int, suffix: bytes = b"") -> bytes:
    """`CTS::<tso>[::suffix]`: the text of the mark that ends every output transaction."""
    return CTS_PREFIX + str(tso).encode() + (b"::" + suffix if suffix else b"")


def cts_mark(
    tso: int, suffix: bytes = b"", carrier: MarkCarrier = ROWS_QUERY_MARK
) -> RowsQueryEvent | BinlogCheckpointEvent:
    """The commit-TSO mark that ends every output transaction, as the codec body of
    `carrier` (the mysql flavour's ROWS_QUERY by default)."""
    return carrier.body(cts_text(tso, suffix))


def cts_mark_text(event: Buffer) -> bytes | None:
    """The text (`CTS::…`) of a raw CTS mark event of either carrier (header + body + CRC32),
    None if `event` is not one. The one reader of the marks' layout."""
    carrier = MARK_CARRIERS.get(event[4])
    if carrier is None:
        return None
    at = carrier.text_at
    if bytes(event[at : at + len(CTS_PREFIX)]) != CTS_PREFIX:
        return None
    return bytes(event[at : len(event) - CHECKSUM_LEN])


def parse_cts(query: bytes) -> int | None:
    if not query.startswith(CTS_PREFIX):
        return None
    digits = query[len(CTS_PREFIX) :].split(b"::", 1)[0]
    return int(digits) if digits.isdigit() else None


class GtidInterval(NamedTuple):
    start: int
    end: int  # exclusive


@dataclass(slots=True)
class PreviousGtidsEvent:
    TYPE_CODE: ClassVar[int] = EventType.PREVIOUS_GTIDS

    sids: tuple[tuple[bytes, tuple[GtidInterval, ...]], ...] = ()

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> PreviousGtidsEvent:
        mv = memoryview(body)
        head, pos = take(mv, 0, 8, "PREVIOUS_GTIDS count")
        n = _U64.unpack(head)[0]
        if n * 24 > len(mv):
            raise CodecError(f"PREVIOUS_GTIDS claims {n} sids in {len(mv)} bytes")
        sids = []
        for _ in range(n):
            sid, pos = take(mv, pos, 16, "PREVIOUS_GTIDS sid")
            cnt_b, pos = take(mv, pos, 8, "PREVIOUS_GTIDS interval count")
            cnt = _U64.unpack(cnt_b)[0]
            if cnt * 16 > len(mv) - pos:
                raise CodecError(f"PREVIOUS_GTIDS claims {cnt} intervals in {len(mv) - pos} bytes")
            ivs = []
            for _ in range(cnt):
                iv, pos = take(mv, pos, 16, "PREVIOUS_GTIDS interval")
                ivs.append(GtidInterval(*struct.unpack("<QQ", iv)))
            sids.append((bytes(sid), tuple(ivs)))
        return cls(tuple(sids))

    def build(self) -> bytes:
        out = [_U64.pack(len(self.sids))]
        for sid, ivs in self.sids:
            out += [sid, _U64.pack(len(ivs))] + [struct.pack("<QQ", *iv) for iv in ivs]
        return b"".join(out)


@dataclass(slots=True)
class MysqlGtidEvent:
    """GTID (33) / ANONYMOUS_GTID (34). Fields after the 5.7 layout are kept raw in `rest`."""

    TYPE_CODES: ClassVar[tuple[int, ...]] = (EventType.GTID, EventType.ANONYMOUS_GTID)

    type_code: int
    flags: int
    sid: bytes
    gno: int
    lt_type: int | None = 2
    last_committed: int = 0
    sequence_number: int = 0
    rest: bytes = b""

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription, type_code: int) -> MysqlGtidEvent:
        mv = memoryview(body)
        head, pos = take(mv, 0, 25, "GTID flags/sid/gno")
        flags, sid, gno = head[0], bytes(head[1:17]), _U64.unpack(head[17:25])[0]
        if pos == len(mv):
            return cls(type_code, flags, sid, gno, None, 0, 0)
        lt, pos = take(mv, pos, 17, "GTID logical timestamps")
        last, seq = struct.unpack("<QQ", lt[1:])
        return cls(type_code, flags, sid, gno, lt[0], last, seq, bytes(mv[pos:]))

    def build(self) -> bytes:
        out = bytes((self.flags,)) + self.sid + _U64.pack(self.gno)
        if self.lt_type is None:
            return out
        return (
            out
            + bytes((self.lt_type,))
            + struct.pack("<QQ", self.last_committed, self.sequence_number)
            + self.rest
        )


class Xid(NamedTuple):
    format_id: int
    gtrid: bytes
    bqual: bytes


@dataclass(slots=True)
class XaPrepareEvent:
    """XA_PREPARE_LOG_EVENT (38), same layout on MySQL and MariaDB."""

    TYPE_CODE: ClassVar[int] = EventType.XA_PREPARE

    one_phase: bool
    xid: Xid

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> XaPrepareEvent:
        mv = memoryview(body)
        head, pos = take(mv, 0, 13, "XA_PREPARE header")
        one_phase = head[0]
        fmt, glen, blen = struct.unpack("<iII", head[1:13])
        if glen > 64 or blen > 64:
            raise CodecError(f"XA_PREPARE gtrid/bqual lengths {glen}/{blen} exceed 64")
        data, pos = take(mv, pos, glen + blen, "XA_PREPARE xid data")
        return cls(bool(one_phase), Xid(fmt, bytes(data[:glen]), bytes(data[glen:])))

    def build(self) -> bytes:
        x = self.xid
        return (
            bytes((int(self.one_phase),))
            + struct.pack("<iII", x.format_id, len(x.gtrid), len(x.bqual))
            + x.gtrid
            + x.bqual
        )


@dataclass(slots=True)
class MariadbGtidEvent:
    """MariaDB GTID (162): seq_no, domain, flags2, then commit_id and/or the XA xid, then the
    10.5+ extra flags. Unparsed trailing bytes (padding to 19 bytes) are kept for exact rebuild."""

    TYPE_CODE: ClassVar[int] = EventType.MARIADB_GTID

    seq_no: int
    domain_id: int
    flags2: int
    commit_id: int | None = None
    xid: Xid | None = None
    flags_extra: int | None = None
    extra_engines: int | None = None
    sa_seq_no: int | None = None
    trailer: bytes = b""

    @property
    def is_prepared_xa(self) -> bool:
        return bool(self.flags2 & MariadbGtidFlag.PREPARED_XA)

    @property
    def is_completed_xa(self) -> bool:
        return bool(self.flags2 & MariadbGtidFlag.COMPLETED_XA)

    @property
    def is_standalone(self) -> bool:
        return bool(self.flags2 & MariadbGtidFlag.STANDALONE)

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> MariadbGtidEvent:
        mv = memoryview(body)
        head, pos = take(mv, 0, 13, "MariaDB GTID header")
        seq_no, domain, flags2 = struct.unpack("<QIB", head)
        ev = cls(seq_no, domain, flags2)
        if flags2 & MariadbGtidFlag.GROUP_COMMIT_ID:
            cid, pos = take(mv, pos, 8, "MariaDB GTID commit_id")
            ev.commit_id = _U64.unpack(cid)[0]
        if flags2 & (MariadbGtidFlag.PREPARED_XA | MariadbGtidFlag.COMPLETED_XA):
            xh, pos = take(mv, pos, 6, "MariaDB GTID xid header")
            fmt, glen, blen = struct.unpack("<iBB", xh)
            if glen > 64 or blen > 64:
                raise CodecError(f"MariaDB GTID xid lengths {glen}/{blen} exceed 64")
            data, pos = take(mv, pos, glen + blen, "MariaDB GTID xid data")
            ev.xid = Xid(fmt, bytes(data[:glen]), bytes(data[glen:]))
        if pos < len(mv):
            ev.flags_extra = mv[pos]
            pos += 1
            if ev.flags_extra & 1:  # FL_EXTRA_MULTI_ENGINE
                eng, pos = take(mv, pos, 1, "MariaDB GTID extra_engines")
                ev.extra_engines = eng[0]
            if ev.flags_extra & (4 | 8):  # FL_COMMIT_ALTER / FL_ROLLBACK_ALTER
                sa, pos = take(mv, pos, 8, "MariaDB GTID sa_seq_no")
                ev.sa_seq_no = _U64.unpack(sa)[0]
        ev.trailer = bytes(mv[pos:])
        return ev

    def build(self) -> bytes:
        out = bytearray(struct.pack("<QIB", self.seq_no, self.domain_id, self.flags2))
        if self.flags2 & MariadbGtidFlag.GROUP_COMMIT_ID:
            out += _U64.pack(self.commit_id or 0)
        if self.flags2 & (MariadbGtidFlag.PREPARED_XA | MariadbGtidFlag.COMPLETED_XA):
            x = self.xid or Xid(1, b"", b"")
            out += struct.pack("<iBB", x.format_id, len(x.gtrid), len(x.bqual)) + x.gtrid + x.bqual
        if self.flags_extra is not None:
            out.append(self.flags_extra)
            if self.flags_extra & 1:
                out.append(self.extra_engines or 0)
            if self.flags_extra & (4 | 8):
                out += _U64.pack(self.sa_seq_no or 0)
        return bytes(out) + self.trailer


class DomainGtid(NamedTuple):
    domain_id: int
    server_id: int
    seq_no: int


@dataclass(slots=True)
class GtidListEvent:
    TYPE_CODE: ClassVar[int] = EventType.GTID_LIST

    gtids: tuple[DomainGtid, ...] = ()
    flags: int = 0  # top 4 bits of the count word
    trailer: bytes = b""  # MariaDB pads an empty list with 2 zero bytes; kept for exact rebuild

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> GtidListEvent:
        mv = memoryview(body)
        head, pos = take(mv, 0, 4, "GTID_LIST count")
        word = _U32.unpack(head)[0]
        n = word & 0x0FFFFFFF
        data, pos = take(mv, pos, n * 16, "GTID_LIST entries")
        gtids = tuple(DomainGtid(*struct.unpack_from("<IIQ", data, i * 16)) for i in range(n))
        return cls(gtids, word >> 28, bytes(mv[pos:]))

    def build(self) -> bytes:
        entries = b"".join(struct.pack("<IIQ", *g) for g in self.gtids)
        return _U32.pack(len(self.gtids) | self.flags << 28) + entries + self.trailer


@dataclass(slots=True)
class BinlogCheckpointEvent:
    TYPE_CODE: ClassVar[int] = EventType.BINLOG_CHECKPOINT

    log_file: bytes

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> BinlogCheckpointEvent:
        head, pos = take(body, 0, 4, "BINLOG_CHECKPOINT name length")
        name, _ = take(body, pos, _U32.unpack(head)[0], "BINLOG_CHECKPOINT name")
        return cls(bytes(name))

    def build(self) -> bytes:
        return _U32.pack(len(self.log_file)) + self.log_file


@dataclass(slots=True)
class AnnotateRowsEvent:
    """MariaDB ANNOTATE_ROWS (160): the statement text, comments (TraceId hints) included."""

    TYPE_CODE: ClassVar[int] = EventType.ANNOTATE_ROWS

    query: bytes

    @classmethod
    def parse(cls, body: Buffer, fde: FormatDescription) -> AnnotateRowsEvent:
        return cls(bytes(body))

    def build(self) -> bytes:
        return self.query


@dataclass(slots=True)
class UnknownEvent:
    """An event type the codec has no class for: bytes kept as they are."""

    type_code: int
    raw: bytes = b""

    def build(self) -> bytes:
        return self.raw


_SIMPLE = (
    StopEvent,
    RotateEvent,
    XidEvent,
    HeartbeatEvent,
    RowsQueryEvent,
    PreviousGtidsEvent,
    XaPrepareEvent,
    MariadbGtidEvent,
    GtidListEvent,
    BinlogCheckpointEvent,
    AnnotateRowsEvent,
    QueryEvent,
    TableMapEvent,
    FormatDescription,
)
# Type code -> class. Classes covering several codes (rows, MySQL GTID) take the code as a
# third parse argument; see `parse_body`.
REGISTRY: dict[int, type] = {cls.TYPE_CODE: cls for cls in _SIMPLE}
REGISTRY.update({code: RowsEvent for code in ROWS_TYPES})
REGISTRY.update({code: MysqlGtidEvent for code in MysqlGtidEvent.TYPE_CODES})
_MULTI = (RowsEvent, MysqlGtidEvent)
_NOT_SUPPORTED = {
    EventType.TRANSACTION_PAYLOAD: "TRANSACTION_PAYLOAD (binlog_transaction_compression) is not supported",
    **{
        code: "compressed MariaDB events are not supported; set log_bin_compress=OFF on the DN"
        for code in range(165, 172)
    },
}


@dataclass(slots=True)
class Event:
    header: EventHeader
    body: object
    pos: int | None = None

    @property
    def type_code(self) -> int:
        return self.header.type_code


def parse_body(
    type_code: int, body: Buffer, fde: FormatDescription, *, strict: bool = False
) -> object:
    """Parse a body (no header, no CRC; for the FDE, alg byte + CRC included)."""
    cls = REGISTRY.get(type_code)
    if cls is None:
        if strict and type_code in _NOT_SUPPORTED:
            raise NotSupportedError(_NOT_SUPPORTED[type_code])
        return UnknownEvent(type_code, bytes(body))
    if cls in _MULTI:
        return cls.parse(body, fde, type_code)  # type: ignore[attr-defined]
    return cls.parse(body, fde)  # type: ignore[attr-defined]


def body_view(event: Buffer, fde: FormatDescription) -> memoryview:
    """The body of a raw event: without header and (unless FDE) without CRC."""
    mv = memoryview(event)
    if mv[4] == EventType.FORMAT_DESCRIPTION:
        return mv[HEADER_LEN:]
    return mv[HEADER_LEN : len(mv) - fde.checksum_len]


def decode_event(
    event: Buffer,
    fde: FormatDescription,
    *,
    pos: int | None = None,
    file: str | None = None,
    strict: bool = False,
) -> Event:
    """Decode one whole raw event (header + body [+ CRC]); CRC is not checked here (the reader does)."""
    try:
        header = EventHeader.unpack(event)
        if header.event_size != len(event):
            raise CodecError(f"event_size {header.event_size} != buffer length {len(event)}")
        minimum = HEADER_LEN + (
            CHECKSUM_LEN if header.type_code == EventType.FORMAT_DESCRIPTION else fde.checksum_len
        )
        if len(event) < minimum:
            raise CodecError(f"event of {len(event)} bytes is shorter than header + checksum")
        body = parse_body(header.type_code, body_view(event, fde), fde, strict=strict)
    except CodecError as e:
        raise e.located(file=file, pos=pos) from None
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as e:
        raise CodecError(f"malformed event body: {e}", file=file, pos=pos) from e
    return Event(header, body, pos)


def encode_event(
    body: object,
    *,
    timestamp: int = 0,
    server_id: int = 0,
    log_pos: int = 0,
    flags: int | None = None,
    type_code: int | None = None,
    checksum: bool = True,
) -> bytes:
    """Header + body + CRC32. `flags` defaults to the class's DEFAULT_FLAGS (0x80 for ROWS_QUERY)."""
    if type_code is None:
        type_code = getattr(body, "type_code", None) or getattr(body, "TYPE_CODE")  # noqa: B009
    if flags is None:
        flags = getattr(body, "DEFAULT_FLAGS", 0)
    if type_code == EventType.ROWS_QUERY:
        flags |= EventFlag.IGNORABLE  # MariaDB refuses type 29 without it
    payload = body.build()  # type: ignore[attr-defined]
    crc_len = CHECKSUM_LEN if (checksum or type_code == EventType.FORMAT_DESCRIPTION) else 0
    size = HEADER_LEN + len(payload) + crc_len
    buf = bytearray(size)
    EventHeader(timestamp, type_code, server_id, size, log_pos, flags).pack_into(buf, 0)
    buf[HEADER_LEN : HEADER_LEN + len(payload)] = payload
    if crc_len:
        seal(buf)
    return bytes(buf)


__all__ = [
    "CHECKPOINT_MARK",
    "MARK_CARRIERS",
    "REGISTRY",
    "ROWS_QUERY_MARK",
    "MarkCarrier",
    "AnnotateRowsEvent",
    "BinlogCheckpointEvent",
    "Event",
    "FormatDescription",
    "GtidListEvent",
    "HeartbeatEvent",
    "MariadbGtidEvent",
    "MysqlGtidEvent",
    "PreviousGtidsEvent",
    "QueryEvent",
    "RotateEvent",
    "RowsEvent",
    "RowsQueryEvent",
    "StopEvent",
    "TableMapEvent",
    "UnknownEvent",
    "XaPrepareEvent",
    "Xid",
    "XidEvent",
    "body_view",
    "cts_mark",
    "cts_mark_text",
    "cts_text",
    "decode_event",
    "encode_event",
    "parse_body",
    "parse_cts",
]
