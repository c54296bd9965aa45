"""Event_type names and MySQL-style Info texts of SHOW BINLOG EVENTS, decoded from event headers
and the few bodies that need it (no row decoding)."""

from __future__ import annotations

import struct
import uuid

from dumper.server.binlog_files import HEADER_LEN, RawEvent, fde_server_version

TYPE_NAMES = {
    1: "Start_v3",
    2: "Query",
    3: "Stop",
    4: "Rotate",
    5: "Intvar",
    13: "Rand",
    14: "User var",
    15: "Format_desc",
    16: "Xid",
    19: "Table_map",
    23: "Write_rows_v1",
    24: "Update_rows_v1",
    25: "Delete_rows_v1",
    26: "Incident",
    27: "Heartbeat",
    28: "Ignorable",
    29: "Rows_query",
    30: "Write_rows",
    31: "Update_rows",
    32: "Delete_rows",
    33: "Gtid",
    34: "Anonymous_Gtid",
    35: "Previous_gtids",
    36: "Transaction_context",
    37: "View_change",
    38: "XA_prepare",
    39: "Update_rows_partial",
    40: "Transaction_payload",
    41: "Heartbeat_v2",
    160: "Annotate_rows",
    161: "Binlog_checkpoint",
    162: "Gtid",
    163: "Gtid_list",
    164: "Start_encryption",
}
STMT_END_F = 0x0001
SUPPRESS_USE_F = 0x0008


def event_type_name(type_code: int) -> str:
    return TYPE_NAMES.get(type_code, f"Unknown({type_code})")


def _body(event: RawEvent, checksum_len: int) -> bytes:
    return event.data[HEADER_LEN : len(event.data) - checksum_len]


def _query_info(event: RawEvent, body: bytes) -> str:
    db_len = body[8]
    status_len = struct.unpack_from("<H", body, 11)[0]
    pos = 13 + status_len
    db = body[pos : pos + db_len].decode("utf-8", "replace")
    query = body[pos + db_len + 1 :].decode("utf-8", "replace")
    if db and not event.flags & SUPPRESS_USE_F and query != "BEGIN":
        return f"use `{db}`; {query}"
    return query


def _gtid_set(body: bytes) -> str:
    (n_sids,) = struct.unpack_from("<Q", body, 0)
    pos, parts = 8, []
    for _ in range(n_sids):
        sid = str(uuid.UUID(bytes=bytes(body[pos : pos + 16])))
        (n,) = struct.unpack_from("<Q", body, pos + 16)
        pos += 24
        ranges = []
        for _ in range(n):
            start, end = struct.unpack_from("<QQ", body, pos)
            pos += 16
            ranges.append(str(start) if end - start == 1 else f"{start}-{end - 1}")
        parts.append(":".join([sid, *ranges]))
    return ",\n".join(parts)


def event_info(event: RawEvent, checksum_len: int) -> str:
    """The Info column; '' for events MySQL prints nothing for. Never raises on odd bodies."""
    try:
        return _info(event, checksum_len)
    except (struct.error, IndexError, ValueError):
        return "(undecodable event body)"


def _info(event: RawEvent, checksum_len: int) -> str:
    t = event.type_code
    if t == 15:
        (version,) = struct.unpack_from("<H", event.data, HEADER_LEN)
        return f"Server ver: {fde_server_version(event.data)}, Binlog ver: {version}"
    body = _body(event, checksum_len)
    if t == 2:
        return _query_info(event, body)
    if t == 4:
        (pos,) = struct.unpack_from("<Q", body, 0)
        return f"{body[8:].decode('utf-8', 'replace')};pos={pos}"
    if t == 16:
        return f"COMMIT /* xid={struct.unpack_from('<Q', body, 0)[0]} */"
    if t == 19:
        table_id = int.from_bytes(body[0:6], "little")
        db_len = body[8]
        db = body[9 : 9 + db_len].decode("utf-8", "replace")
        tbl_len = body[10 + db_len]
        tbl = body[11 + db_len : 11 + db_len + tbl_len].decode("utf-8", "replace")
        return f"table_id: {table_id} ({db}.{tbl})"
    if t in (23, 24, 25, 30, 31, 32, 39):
        table_id = int.from_bytes(body[0:6], "little")
        (flags,) = struct.unpack_from("<H", body, 6)
        return f"table_id: {table_id}" + (" flags: STMT_END_F" if flags & STMT_END_F else "")
    if t == 29:
        return "# " + body[1:].decode("utf-8", "replace")  # 1 length byte, then the text
    if t == 160:
        return body.decode("utf-8", "replace")
    if t in (33, 34):
        if t == 34:
            return "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"
        sid = uuid.UUID(bytes=bytes(body[1:17]))
        (gno,) = struct.unpack_from("<Q", body, 17)
        return f"SET @@SESSION.GTID_NEXT= '{sid}:{gno}'"
    if t == 35:
        return _gtid_set(body)
    if t == 162:
        seq, domain = struct.unpack_from("<QI", body, 0)
        kind = "GTID" if body[12] & 0x01 else "BEGIN GTID"  # FL_STANDALONE: no BEGIN
        return f"{kind} {domain}-{event.server_id}-{seq}"
    if t == 161:
        (n,) = struct.unpack_from("<I", body, 0)
        return body[4 : 4 + n].decode("utf-8", "replace")
    if t == 163:
        (count,) = struct.unpack_from("<I", body, 0)
        count &= 0x0FFFFFFF
        items = []
        for i in range(count):
            domain, server, seq = struct.unpack_from("<IIQ", body, 4 + 16 * i)
            items.append(f"{domain}-{server}-{seq}")
        return "[" + ",".join(items) + "]"
    return ""
