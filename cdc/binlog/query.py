"""QUERY_EVENT (2): parse any server's status variables; build ones with only the keys every
consumer knows (FLAGS2, SQL_MODE, AUTO_INCREMENT, CHARSET, CATALOG_NZ); where a raw event's
statement starts (`text_start`: per-event loops read it without decoding; compiled modules use
query.pxd's, which reads a buffer pointer in C)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .constants import (
    COLLATION_UTF8MB4_GENERAL_CI,
    HEADER_LEN,
    QUERY_DB_LEN_OFFSET,
    QUERY_POST_HEADER_LEN,
    QUERY_STATUS_LEN_OFFSET,
    EventType,
    QueryStatus,
)
from .errors import CodecError

if TYPE_CHECKING:
    from .fde import FormatDescription

_POST = struct.Struct("<IIBHH")  # thread_id, exec_time, db_len, error_code, status_vars_len


def text_start(data, at: int = 0) -> int:
    """Where the statement of the raw QUERY event at `at` of `data` (bytes-like) starts: after
    its header, post-header, status variables and default database (NUL-terminated). The caller
    knows the post-header is there (`HEADER_LEN + QUERY_POST_HEADER_LEN` bytes)."""
    status = at + QUERY_STATUS_LEN_OFFSET
    status_len = data[status] | data[status + 1] << 8
    db_len = data[at + QUERY_DB_LEN_OFFSET]
    return at + HEADER_LEN + QUERY_POST_HEADER_LEN + status_len + db_len + 1


# Fixed sizes of status variables (None = variable length, handled below).
_FIXED = {
    QueryStatus.FLAGS2: 4,
    QueryStatus.SQL_MODE: 8,
    QueryStatus.AUTO_INCREMENT: 4,
    QueryStatus.CHARSET: 6,
    QueryStatus.LC_TIME_NAMES: 2,
    QueryStatus.CHARSET_DATABASE: 2,
    QueryStatus.TABLE_MAP_FOR_UPDATE: 8,
    QueryStatus.MASTER_DATA_WRITTEN: 4,
    QueryStatus.MICROSECONDS: 3,
    QueryStatus.EXPLICIT_DEFAULTS_FOR_TIMESTAMP: 1,
    QueryStatus.DDL_LOGGED_WITH_XID: 8,
    QueryStatus.DEFAULT_COLLATION_FOR_UTF8MB4: 2,
    QueryStatus.SQL_REQUIRE_PRIMARY_KEY: 1,
    QueryStatus.DEFAULT_TABLE_ENCRYPTION: 1,
    QueryStatus.HRNOW: 3,
    QueryStatus.XID: 8,
    QueryStatus.GTID_FLAGS3: 1,
}


def parse_status_vars(raw: bytes) -> dict[int, bytes]:
    """Split status vars into {key: value bytes}. Parsing stops at the first key whose size is
    unknown (as MySQL does); the raw block stays available on the event."""
    out: dict[int, bytes] = {}
    pos, n = 0, len(raw)
    while pos < n:
        key = raw[pos]
        pos += 1
        size = _FIXED.get(key)  # type: ignore[call-overload]
        if size is None:
            if key in (QueryStatus.CATALOG_NZ, QueryStatus.TIME_ZONE):
                size = 1 + raw[pos] if pos < n else 1
            elif key == QueryStatus.CATALOG:
                size = 2 + raw[pos] if pos < n else 1
            elif key == QueryStatus.INVOKER:
                if pos >= n:
                    break
                ulen = raw[pos]
                hpos = pos + 1 + ulen
                size = 1 + ulen + 1 + (raw[hpos] if hpos < n else 0)
            elif key == QueryStatus.UPDATED_DB_NAMES:
                size = _updated_db_names_size(raw, pos)
            elif key == QueryStatus.CHARACTER_SET_COLLATIONS:
                # MariaDB 11+: 1 count byte then count * 4 bytes.
                size = 1 + 4 * raw[pos] if pos < n else 1
            else:
                break
        if pos + size > n:
            raise CodecError(f"QUERY status variable {key:#x} overruns the status block")
        out[key] = raw[pos : pos + size]
        pos += size
    return out


def _updated_db_names_size(raw: bytes, pos: int) -> int:
    if pos >= len(raw):
        return 1
    count = raw[pos]
    p = pos + 1
    if count != 254:  # 254 = OVER_MAX_DBS_IN_EVENT_MTS: no names follow
        for _ in range(count):
            end = raw.find(b"\0", p)
            if end < 0:
                raise CodecError("QUERY status Q_UPDATED_DB_NAMES: name without NUL")
            p = end + 1
    return p - pos


def build_status_vars(
    *,
    flags2: int = 0,
    sql_mode: int = 0,
    auto_increment: tuple[int, int] = (1, 1),
    charset: tuple[int, int, int] = (
        COLLATION_UTF8MB4_GENERAL_CI,
        COLLATION_UTF8MB4_GENERAL_CI,
        COLLATION_UTF8MB4_GENERAL_CI,
    ),
    catalog: bytes = b"std",
) -> bytes:
    """Status variables for output QUERY events: keys every consumer parses."""
    if 255 in charset:
        raise ValueError("collation 255 is unknown to MariaDB; use 45/46/33/224")
    return b"".join(
        (
            struct.pack("<BI", QueryStatus.FLAGS2, flags2),
            struct.pack("<BQ", QueryStatus.SQL_MODE, sql_mode),
            struct.pack("<BB", QueryStatus.CATALOG_NZ, len(catalog)) + catalog,
            struct.pack("<BHH", QueryStatus.AUTO_INCREMENT, *auto_increment),
            struct.pack("<BHHH", QueryStatus.CHARSET, *charset),
        )
    )


DEFAULT_STATUS_VARS = build_status_vars()


@dataclass(slots=True)
class QueryEvent:
    TYPE_CODE: ClassVar[int] = EventType.QUERY

    query: bytes
    db: bytes = b""
    status_vars: bytes = DEFAULT_STATUS_VARS
    thread_id: int = 0
    exec_time: int = 0
    error_code: int = 0

    @property
    def status(self) -> dict[int, bytes]:
        return parse_status_vars(self.status_vars)

    @property
    def charset(self) -> tuple[int, int, int] | None:
        raw = self.status.get(QueryStatus.CHARSET)
        return struct.unpack("<HHH", raw) if raw else None  # type: ignore[return-value]

    @classmethod
    def parse(cls, body: bytes | memoryview, fde: FormatDescription) -> QueryEvent:
        post_len = fde.post_header_len(EventType.QUERY) or QUERY_POST_HEADER_LEN
        if post_len < QUERY_POST_HEADER_LEN or len(body) < post_len:
            raise CodecError(f"QUERY body of {len(body)} bytes shorter than post-header {post_len}")
        thread_id, exec_time, db_len, err, sv_len = _POST.unpack_from(body, 0)
        pos = post_len
        end_sv = pos + sv_len
        end_db = end_sv + db_len
        if end_db + 1 > len(body):
            raise CodecError(
                f"QUERY status vars ({sv_len}) + db ({db_len}) overrun a body of {len(body)}"
            )
        mv = memoryview(body)
        return cls(
            query=bytes(mv[end_db + 1 :]),
            db=bytes(mv[end_sv:end_db]),
            status_vars=bytes(mv[pos:end_sv]),
            thread_id=thread_id,
            exec_time=exec_time,
            error_code=err,
        )

    def build(self) -> bytes:
        if len(self.db) > 255:
            raise ValueError("db name longer than 255 bytes")
        return b"".join(
            (
                _POST.pack(
                    self.thread_id,
                    self.exec_time,
                    len(self.db),
                    self.error_code,
                    len(self.status_vars),
                ),
                self.status_vars,
                self.db,
                b"\0",
                self.query,
            )
        )
