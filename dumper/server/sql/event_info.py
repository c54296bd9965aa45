"""Event_type names and MySQL-style Info texts of SHOW BINLOG EVENTS, decoded from event headers
and the few bodies that need it (no row decoding)."""

from __future__ import annotations

import struct
import uuid

from cdc.binlog.constants import HEADER_LEN, QUERY_DB_LEN_OFFSET, ROWS_TYPES, EventType
from cdc.binlog.flavor import FL_STANDALONE
from cdc.binlog.query import text_start
from dumper.server.store.binlog_files import RawEvent, fde_server_version

E = EventType

TYPE_NAMES = {
    E.START_V3: "Start_v3",
    E.QUERY: "Query",
    E.STOP: "Stop",
    E.ROTATE: "Rotate",
    E.INTVAR: "Intvar",
    E.RAND: "Rand",
    E.USER_VAR: "User var",
    E.FORMAT_DESCRIPTION: "Format_desc",
    E.XID: "Xid",
    E.TABLE_MAP: "Table_map",
    E.WRITE_ROWS_V1: "Write_rows_v1",
    E.UPDATE_ROWS_V1: "Update_rows_v1",
    E.DELETE_ROWS_V1: "Delete_rows_v1",
    E.INCIDENT: "Incident",
    E.HEARTBEAT: "Heartbeat",
    E.IGNORABLE: "Ignorable",
    E.ROWS_QUERY: "Rows_query",
    E.WRITE_ROWS: "Write_rows",
    E.UPDATE_ROWS: "Update_rows",
    E.DELETE_ROWS: "Delete_rows",
    E.GTID: "Gtid",
    E.ANONYMOUS_GTID: "Anonymous_Gtid",
    E.PREVIOUS_GTIDS: "Previous_gtids",
    E.TRANSACTION_CONTEXT: "Transaction_context",
    E.VIEW_CHANGE: "View_change",
    E.XA_PREPARE: "XA_prepare",
    E.PARTIAL_UPDATE_ROWS: "Update_rows_partial",
    E.TRANSACTION_PAYLOAD: "Transaction_payload",
    E.HEARTBEAT_V2: "Heartbeat_v2",
    E.ANNOTATE_ROWS: "Annotate_rows",
    E.BINLOG_CHECKPOINT: "Binlog_checkpoint",
    E.MARIADB_GTID: "Gtid",
    E.GTID_LIST: "Gtid_list",
    E.START_ENCRYPTION: "Start_encryption",
}
STMT_END_F = 0x0001
SUPPRESS_USE_F = 0x0008


def event_type_name(type_code: int) -> str:
    return TYPE_NAMES.get(type_code, f"Unknown({type_code})")


def _body(event: RawEvent, checksum_len: int) -> bytes:
    return event.data[HEADER_LEN : len(event.data) - checksum_len]


def _query_info(event: RawEvent, body: bytes) -> str:
    db_len = body[QUERY_DB_LEN_OFFSET - HEADER_LEN]
    start = text_start(event.data) - HEADER_LEN  # of the statement, in the body
    db = body[start - 1 - db_len : start - 1].decode("utf-8", "replace")
    query = body[start:].decode("utf-8", "replace")
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
    if t == E.FORMAT_DESCRIPTION:
        (version,) = struct.unpack_from("<H", event.data, HEADER_LEN)
        return f"Server ver: {fde_server_version(event.data)}, Binlog ver: {version}"
    body = _body(event, checksum_len)
    if t == E.QUERY:
        return _query_info(event, body)
    if t == E.ROTATE:
        (pos,) = struct.unpack_from("<Q", body, 0)
        return f"{body[8:].decode('utf-8', 'replace')};pos={pos}"
    if t == E.XID:
        return f"COMMIT /* xid={struct.unpack_from('<Q', body, 0)[0]} */"
    if t == E.TABLE_MAP:
        table_id = int.from_bytes(body[0:6], "little")
        db_len = body[8]
        db = body[9 : 9 + db_len].decode("utf-8", "replace")
        tbl_len = body[10 + db_len]
        tbl = body[11 + db_len : 11 + db_len + tbl_len].decode("utf-8", "replace")
        return f"table_id: {table_id} ({db}.{tbl})"
    if t in ROWS_TYPES or t == E.PARTIAL_UPDATE_ROWS:
        table_id = int.from_bytes(body[0:6], "little")
        (flags,) = struct.unpack_from("<H", body, 6)
        return f"table_id: {table_id}" + (" flags: STMT_END_F" if flags & STMT_END_F else "")
    if t == E.ROWS_QUERY:
        return "# " + body[1:].decode("utf-8", "replace")  # 1 length byte, then the text
    if t == E.ANNOTATE_ROWS:
        return body.decode("utf-8", "replace")
    if t in (E.GTID, E.ANONYMOUS_GTID):
        if t == E.ANONYMOUS_GTID:
            return "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"
        sid = uuid.UUID(bytes=bytes(body[1:17]))
        (gno,) = struct.unpack_from("<Q", body, 17)
        return f"SET @@SESSION.GTID_NEXT= '{sid}:{gno}'"
    if t == E.PREVIOUS_GTIDS:
        return _gtid_set(body)
    if t == E.MARIADB_GTID:
        seq, domain = struct.unpack_from("<QI", body, 0)
        kind = "GTID" if body[12] & FL_STANDALONE else "BEGIN GTID"  # no BEGIN
        return f"{kind} {domain}-{event.server_id}-{seq}"
    if t == E.BINLOG_CHECKPOINT:
        (n,) = struct.unpack_from("<I", body, 0)
        return body[4 : 4 + n].decode("utf-8", "replace")
    if t == E.GTID_LIST:
        (count,) = struct.unpack_from("<I", body, 0)
        count &= 0x0FFFFFFF
        items = []
        for i in range(count):
            domain, server, seq = struct.unpack_from("<IIQ", body, 4 + 16 * i)
            items.append(f"{domain}-{server}-{seq}")
        return "[" + ",".join(items) + "]"
    return ""
