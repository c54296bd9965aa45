"""Test-only generator of small MySQL 5.7-flavoured binlog files (FDE 5.7, PREVIOUS_GTIDS, QUERY,
ROWS_QUERY, TABLE_MAP with optional metadata, WRITE/UPDATE/DELETE_ROWS v2, XID, ROTATE; CRC32)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cdc.protocol.packets import lenenc_int, lenenc_str

MAGIC = b"\xfebin"
VERSION = "5.7.44-cdc-log"
POST_HEADER_57 = bytes.fromhex(
    "380d0008001200040404041200005f00041a08000000080808020000000a0a0a2a2a00123400"
)
UTF8MB4 = 45
IN_USE = 0x0001
IGNORABLE = 0x0080
LONG, VARCHAR = 3, 15


@dataclass(slots=True, frozen=True)
class Col:
    name: str
    type: int  # LONG or VARCHAR
    max_chars: int = 0  # VARCHAR(n)

    @property
    def meta(self) -> bytes:
        return struct.pack("<H", self.max_chars * 4) if self.type == VARCHAR else b""

    def encode(self, value: object) -> bytes:
        if self.type == LONG:
            return struct.pack("<i", int(value))  # type: ignore[arg-type]
        raw = str(value).encode()
        return (
            bytes((len(raw),)) if self.max_chars * 4 < 256 else struct.pack("<H", len(raw))
        ) + raw


@dataclass(slots=True)
class Table:
    table_id: int
    db: str
    name: str
    cols: list[Col]
    pk: list[int] = field(default_factory=lambda: [0])

    def table_map_body(self) -> bytes:
        n = len(self.cols)
        body = self.table_id.to_bytes(6, "little") + struct.pack("<H", 1)
        body += bytes((len(self.db),)) + self.db.encode() + b"\0"
        body += bytes((len(self.name),)) + self.name.encode() + b"\0"
        body += lenenc_int(n) + bytes(c.type for c in self.cols)
        meta = b"".join(c.meta for c in self.cols)
        body += lenenc_int(len(meta)) + meta
        body += bytes((n + 7) // 8 * [0xFF])  # all nullable (the null bitmap)
        numeric = [c for c in self.cols if c.type == LONG]

        def tlv(kind: int, value: bytes) -> bytes:
            return bytes((kind,)) + lenenc_int(len(value)) + value

        body += tlv(1, bytes((len(numeric) + 7) // 8))  # SIGNEDNESS: all signed
        body += tlv(2, lenenc_int(UTF8MB4))  # DEFAULT_CHARSET
        body += tlv(4, b"".join(lenenc_str(c.name) for c in self.cols))  # COLUMN_NAME
        body += tlv(8, b"".join(lenenc_int(i) for i in self.pk))  # SIMPLE_PRIMARY_KEY
        return body

    def row_image(self, row: tuple) -> bytes:
        nulls = bytearray((len(self.cols) + 7) // 8)
        values = b""
        for i, (col, v) in enumerate(zip(self.cols, row, strict=True)):
            if v is None:
                nulls[i // 8] |= 1 << (i % 8)
            else:
                values += col.encode(v)
        return bytes(nulls) + values


class FileBuilder:
    """Bytes of one binlog file; `flush(path)` appends what was added since the last flush."""

    def __init__(self, server_id: int = 1001, timestamp: int = 1_700_000_000, in_use: bool = False):
        self.server_id = server_id
        self.timestamp = timestamp
        self.buf = bytearray(MAGIC)
        self._flushed = 0
        fde = struct.pack("<H50sIB", 4, VERSION.encode(), timestamp, 19) + POST_HEADER_57 + b"\x01"
        start = len(self.buf)
        self.add(15, fde)
        if in_use:  # MySQL computes the FDE CRC as if the flag were clear
            struct.pack_into("<H", self.buf, start + 17, IN_USE)
        self.add(35, bytes(8))  # empty PREVIOUS_GTIDS

    def add(self, type_code: int, body: bytes, flags: int = 0) -> int:
        """Append an event; returns its start offset."""
        start = len(self.buf)
        size = 19 + len(body) + 4
        data = struct.pack(
            "<IBIIIH", self.timestamp, type_code, self.server_id, size, start + size, flags
        )
        data += body
        self.buf += data + struct.pack("<I", zlib.crc32(data))
        return start

    def query(self, sql: str, db: str = "") -> int:
        status = b"\x00" + bytes(4)  # Q_FLAGS2
        status += b"\x01" + bytes(8)  # Q_SQL_MODE
        status += b"\x06\x03std"  # Q_CATALOG_NZ
        status += b"\x04" + struct.pack("<HHH", UTF8MB4, UTF8MB4, UTF8MB4)  # Q_CHARSET
        head = struct.pack("<IIBHH", 7, 0, len(db.encode()), 0, len(status))
        return self.add(2, head + status + db.encode() + b"\0" + sql.encode())

    def rows_query(self, text: str) -> int:
        raw = text.encode()
        return self.add(29, bytes((min(len(raw), 255),)) + raw, flags=IGNORABLE)

    def rows(self, type_code: int, table: Table, images: list[tuple], end: bool = True) -> int:
        n = len(table.cols)
        bitmap = bytes((n + 7) // 8 * [0xFF])
        body = table.table_id.to_bytes(6, "little") + struct.pack("<HH", 1 if end else 0, 2)
        body += lenenc_int(n) + bitmap + (bitmap if type_code == 31 else b"")
        for image in images:
            body += table.row_image(image)
        return self.add(type_code, body)

    def txn(
        self, table: Table, xid: int, *, insert=(), update=(), delete=(), comment: str = ""
    ) -> int:
        """BEGIN, [ROWS_QUERY], TABLE_MAP, row events, XID; returns the end offset."""
        self.query("BEGIN", table.db)
        if comment:
            self.rows_query(comment)
        self.add(19, table.table_map_body())
        kinds = [(30, list(insert)), (31, [x for pair in update for x in pair]), (32, list(delete))]
        kinds = [(t, imgs) for t, imgs in kinds if imgs]
        for i, (t, imgs) in enumerate(kinds):
            self.rows(t, table, imgs, end=i == len(kinds) - 1)
        self.add(16, struct.pack("<Q", xid))
        return len(self.buf)

    def rotate(self, next_name: str) -> int:
        return self.add(4, struct.pack("<Q", 4) + next_name.encode())

    def flush(self, path: Path) -> None:
        with open(path, "ab") as f:
            f.write(self.buf[self._flushed :])
        self._flushed = len(self.buf)


T1 = Table(108, "gbl", "t1", [Col("id", LONG), Col("name", VARCHAR, 20)])
DDL_DB = "CREATE DATABASE IF NOT EXISTS gbl"
DDL_T1 = "CREATE TABLE t1 (id INT NOT NULL PRIMARY KEY, name VARCHAR(20)) DEFAULT CHARSET=utf8mb4"


@dataclass(slots=True)
class Fixture:
    dir: Path
    active: FileBuilder
    expected: dict[int, str | None]  # t1 after all files
    inserted: list[tuple]  # every inserted row, in order
    files: list[str]


def write_fixture(directory: Path) -> Fixture:
    """binlog.000001 (DDL + 2 txns, ROTATE) and binlog.000002 (update, delete, insert; active)."""
    directory.mkdir(parents=True, exist_ok=True)
    f1 = FileBuilder()
    f1.query(DDL_DB)
    f1.query(DDL_T1, "gbl")
    f1.txn(T1, 1, insert=[(1, "a"), (2, "b")], comment="/*CDC trace=1.1 */ insert")
    f1.txn(T1, 2, insert=[(3, "c")])
    f1.rotate("binlog.000002")
    f1.flush(directory / "binlog.000001")
    f2 = FileBuilder(in_use=True)
    f2.txn(T1, 3, update=[((2, "b"), (2, "bb"))])
    f2.txn(T1, 4, delete=[(1, "a")])
    f2.txn(T1, 5, insert=[(4, None)])
    f2.flush(directory / "binlog.000002")
    (directory / "binlog.index").write_text("./binlog.000001\n./binlog.000002\n")
    return Fixture(
        directory,
        f2,
        {2: "bb", 3: "c", 4: None},
        [(1, "a"), (2, "b"), (3, "c"), (4, None)],
        ["binlog.000001", "binlog.000002"],
    )
