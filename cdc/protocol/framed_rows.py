"""Text rows already framed as packets, their sequence ids left for the sender to stamp: a
snapshot read's chunk (`read_path/key_rows.py` merges it straight from the DN's rows), sent in
big writes with no object per row (`dumper/server/wire/session.py`). What needs the rows one
by one (a LIMIT's window, the binary protocol) iterates it, or slices it into payloads."""

from __future__ import annotations

from collections.abc import Iterator

from cdc.protocol.packets import MAX_CHUNK


class FramedRows:
    __slots__ = ("count", "data")

    def __init__(self, data: bytearray, count: int) -> None:
        self.data = data  # the packets, sequence ids 0
        self.count = count  # rows (a row of 16 MB or more is several packets)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[bytes]:
        """Each row's payload (a split one joined)."""
        data, at, parts = self.data, 0, []
        while at < len(data):
            length = int.from_bytes(data[at : at + 3], "little")
            parts.append(bytes(data[at + 4 : at + 4 + length]))
            at += 4 + length
            if length < MAX_CHUNK:
                yield parts[0] if len(parts) == 1 else b"".join(parts)
                parts = []

    def __getitem__(self, rows: slice) -> list[bytes]:
        """Rows as payloads (a LIMIT's window over a chunk)."""
        return list(self)[rows]
