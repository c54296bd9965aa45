"""Rows events: WRITE/UPDATE/DELETE v1 (23-25, MariaDB) and v2 (30-32, MySQL, with the
extra-data block). The body is parsed down to the row data, which stays raw until asked for."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .constants import ROWS_V1_TYPES, ROWS_V2_TYPES, UPDATE_TYPES, EventType, RowsFlag
from .errors import CodecError
from .packed import bitmap_bits, bits_to_bitmap, read_lenenc, take, write_lenenc
from .row_image import decode_image, encode_image
from .table_map import TABLE_ID_MASK, Column

if TYPE_CHECKING:
    from .fde import FormatDescription

_U16 = struct.Struct("<H")

Row = list[object]
UpdatePair = tuple[list[object], list[object]]


@dataclass(slots=True)
class RowsEvent:
    """Any rows event. `extra_data` is None for v1 and the bytes after the 2-byte length for
    v2. `rows_data` is the undecoded sequence of row images."""

    TYPE_CODES: ClassVar[tuple[int, ...]] = (23, 24, 25, 30, 31, 32)

    type_code: int
    table_id: int
    flags: int
    column_count: int
    columns_present: tuple[bool, ...]
    columns_present_after: tuple[bool, ...] | None
    rows_data: bytes
    extra_data: bytes | None = None

    @property
    def is_update(self) -> bool:
        return self.type_code in UPDATE_TYPES

    @property
    def is_v2(self) -> bool:
        return self.type_code in ROWS_V2_TYPES

    @property
    def kind(self) -> str:
        return ("write", "update", "delete")[(self.type_code - (23 if self.type_code < 30 else 30))]

    @property
    def stmt_end(self) -> bool:
        return bool(self.flags & RowsFlag.STMT_END)

    @classmethod
    def parse(cls, body: bytes | memoryview, fde: FormatDescription, type_code: int) -> RowsEvent:
        mv = memoryview(body)
        if type_code not in ROWS_V1_TYPES and type_code not in ROWS_V2_TYPES:
            raise CodecError(f"event type {type_code} is not a rows event")
        post_len = fde.post_header_len(type_code) or (10 if type_code in ROWS_V2_TYPES else 8)
        id_len = 4 if post_len == 6 else 6
        head, pos = take(mv, 0, id_len + 2, "rows event post-header")
        table_id = int.from_bytes(head[:id_len], "little")
        flags = head[id_len] | head[id_len + 1] << 8
        extra = None
        if type_code in ROWS_V2_TYPES:
            raw_len, pos = take(mv, pos, 2, "rows v2 extra-data length")
            extra_len = raw_len[0] | raw_len[1] << 8
            if extra_len < 2:
                raise CodecError(f"rows v2 extra-data length {extra_len} < 2")
            extra_b, pos = take(mv, pos, extra_len - 2, "rows v2 extra data")
            extra = bytes(extra_b)
        ncols, pos = read_lenenc(mv, pos)
        nb = (ncols + 7) // 8
        bm, pos = take(mv, pos, nb, "rows event columns-present bitmap")
        present = tuple(bitmap_bits(bm, ncols))
        after = None
        if type_code in UPDATE_TYPES:
            bm2, pos = take(mv, pos, nb, "rows event after-image bitmap")
            after = tuple(bitmap_bits(bm2, ncols))
        return cls(type_code, table_id, flags, ncols, present, after, bytes(mv[pos:]), extra)

    def build(self) -> bytes:
        if not 0 <= self.table_id <= TABLE_ID_MASK:
            raise ValueError(f"table_id {self.table_id} does not fit 6 bytes")
        parts = [self.table_id.to_bytes(6, "little"), _U16.pack(self.flags)]
        if self.type_code in ROWS_V2_TYPES:
            extra = self.extra_data or b""
            parts += [_U16.pack(len(extra) + 2), extra]
        parts += [write_lenenc(self.column_count), bits_to_bitmap(self.columns_present)]
        if self.type_code in UPDATE_TYPES:
            parts.append(bits_to_bitmap(self.columns_present_after or self.columns_present))
        parts.append(self.rows_data)
        return b"".join(parts)

    def decode_rows(self, columns: Sequence[Column]) -> list[Row] | list[UpdatePair]:
        """Decode all row images with the columns of the matching TABLE_MAP (SLOW path)."""
        if len(columns) != self.column_count:
            raise CodecError(
                f"rows event has {self.column_count} columns, its TABLE_MAP has {len(columns)}"
            )
        mv = memoryview(self.rows_data)
        pos = 0
        out: list = []
        while pos < len(mv):
            start = pos
            before, pos = decode_image(columns, self.columns_present, mv, pos)
            if self.columns_present_after is not None:
                after, pos = decode_image(columns, self.columns_present_after, mv, pos)
                out.append((before, after))
            else:
                out.append(before)
            if pos == start:
                # No column present: a row takes no bytes, and the rest would be read as rows
                # for ever (the fuzz test found one, a list that grew to 22 GB).
                raise CodecError(
                    f"rows event has {len(mv) - pos} bytes of row data but no column present"
                )
        return out

    @classmethod
    def from_rows(
        cls,
        type_code: int,
        table_id: int,
        columns: Sequence[Column],
        rows: Sequence[Sequence[object]] | Sequence[tuple[Sequence[object], Sequence[object]]],
        *,
        flags: int = RowsFlag.STMT_END,
        extra_data: bytes | None = None,
    ) -> RowsEvent:
        """Encode full-image rows (UPDATE rows are (before, after) pairs)."""
        n = len(columns)
        present = (True,) * n
        parts = []
        if type_code in UPDATE_TYPES:
            for before, after in rows:  # type: ignore[misc]
                parts.append(encode_image(columns, present, before))
                parts.append(encode_image(columns, present, after))
        else:
            for row in rows:
                parts.append(encode_image(columns, present, row))  # type: ignore[arg-type]
        if type_code in ROWS_V2_TYPES and extra_data is None:
            extra_data = b""
        return cls(
            type_code,
            table_id,
            flags,
            n,
            present,
            present if type_code in UPDATE_TYPES else None,
            b"".join(parts),
            extra_data if type_code in ROWS_V2_TYPES else None,
        )


WRITE_ROWS = EventType.WRITE_ROWS
UPDATE_ROWS = EventType.UPDATE_ROWS
DELETE_ROWS = EventType.DELETE_ROWS
