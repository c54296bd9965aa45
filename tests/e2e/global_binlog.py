"""Test helper: read the global binlog files back into transactions, with our own codec."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cdc.binlog.constants import EventType
from cdc.binlog.events import cts_mark_text, decode_event, parse_cts
from cdc.binlog.gtid import gtid_text
from cdc.binlog.reader import EventReader
from cdc.binlog.table_map import TableMapEvent


@dataclass(slots=True)
class Txn:
    tso: int | None = None
    mark: bytes = b""
    ddl: str | None = None
    # (db, table, kind, rows): rows are lists (write/delete) or (before, after) pairs
    changes: list[tuple[str, str, str, list]] = field(default_factory=list)
    gtids: list[str] = field(default_factory=list)  # `uuid:n` of its GTID event(s)


def read_global_binlog(directory: Path, base: str = "binlog") -> list[Txn]:
    names = [
        line.strip().lstrip("./")
        for line in (directory / f"{base}.index").read_text().splitlines()
        if line.strip()
    ]
    out: list[Txn] = []
    current = Txn()
    for name in names:
        data = (directory / name).read_bytes()
        tables: dict[int, TableMapEvent] = {}
        reader = EventReader(data, file=name)
        for raw in reader:
            if (mark := cts_mark_text(raw.data)) is not None:  # the transaction's end
                current.tso = parse_cts(mark)
                current.mark = mark
                out.append(current)
                current = Txn()
                continue
            ev = decode_event(raw.data, reader.fde, pos=raw.pos, file=name)
            code = ev.type_code
            body = ev.body
            if code == EventType.TABLE_MAP:
                tables[body.table_id] = body
            elif code in (30, 31, 32):
                tm = tables[body.table_id]
                columns = tm.columns()
                current.changes.append(
                    (tm.schema.decode(), tm.table.decode(), body.kind, body.decode_rows(columns))
                )
            elif code == EventType.GTID:
                current.gtids.append(gtid_text(body.sid, body.gno))
            elif code == EventType.QUERY and body.query not in (b"BEGIN",):
                current.ddl = body.query.decode()
    return out
