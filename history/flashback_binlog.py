"""A flashback plan as a binlog file that `mariadb-binlog file | mariadb` or a replica applies:
the global binlog's own FORMAT_DESCRIPTION, then per inverse transaction (newest first) `BEGIN`,
the TABLE_MAPs it needs (the original events), its inverted rows events and an XID.

Rows are never re-encoded: an inverted event carries the original row images' bytes (WRITE ↔
DELETE swap the event type, an UPDATE swaps each row's two images), so what is applied is
exactly what the global binlog held. No GTID event is written: a replica would skip a GTID it
already executed, and each inverse is a new transaction."""

from __future__ import annotations

from pathlib import Path

from cdc.binlog.checksum import seal
from cdc.binlog.constants import BINLOG_MAGIC, UPDATE_TYPES, EventFlag, RowsFlag
from cdc.binlog.events import QueryEvent, XidEvent, encode_event
from cdc.binlog.fde import FormatDescription
from cdc.binlog.header import OFF_FLAGS, write_log_pos
from cdc.binlog.rows import RowsEvent

from .flashback import Plan


def binlog_bytes(plan: Plan) -> bytes:
    fde_event = bytearray(plan.fde_raw)
    fde = FormatDescription.parse(bytes(fde_event[19:]))
    flags = int.from_bytes(fde_event[OFF_FLAGS : OFF_FLAGS + 2], "little")
    fde_event[OFF_FLAGS : OFF_FLAGS + 2] = (flags & ~EventFlag.BINLOG_IN_USE).to_bytes(2, "little")
    seal(fde_event)  # a closed file: mariadb-binlog warns about one still in use
    out = bytearray(BINLOG_MAGIC)
    out += fde_event
    checksum = fde.has_checksum

    def append(event: bytes | bytearray) -> None:
        buf = bytearray(event)
        write_log_pos(buf, 0, len(out) + len(buf))
        if checksum:
            seal(buf)
        out.extend(buf)

    for n, txn in enumerate(plan.undo, 1):
        head = txn.changes[0]
        stamp = {"timestamp": head.timestamp, "server_id": head.server_id, "checksum": checksum}
        append(encode_event(QueryEvent(b"BEGIN"), **stamp))
        mapped = set()
        for change in txn.changes:
            if change.shape.table_id not in mapped:
                mapped.add(change.shape.table_id)
                append(change.shape.raw)
        for i, change in enumerate(txn.changes):
            images = b"".join(
                (r.before_bytes + r.after_bytes)
                if r.kind == "update"
                else (r.after_bytes if r.kind == "write" else r.before_bytes)
                for r in change.rows
            )
            last = i == len(txn.changes) - 1
            flags = (
                (change.flags | RowsFlag.STMT_END) if last else (change.flags & ~RowsFlag.STMT_END)
            )
            columns = len(change.shape.columns)
            present = (True,) * columns
            body = RowsEvent(
                change.type_code,
                change.shape.table_id,
                flags,
                columns,
                present,
                present if change.type_code in UPDATE_TYPES else None,
                images,
                change.extra_data,
            )
            append(
                encode_event(
                    body, timestamp=change.timestamp, server_id=change.server_id, checksum=checksum
                )
            )
        append(encode_event(XidEvent(n), **stamp))
    return bytes(out)


def write_binlog(plan: Plan, path: Path) -> None:
    Path(path).write_bytes(binlog_bytes(plan))
