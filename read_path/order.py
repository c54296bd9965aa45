"""Pure: ORDER BY columns other than the primary key (docs/snapshot-reads.md, "ORDER BY").

Rows at P arrive in primary-key order; another order needs them all before the first is sent.
They are held in memory up to `[dumper] snapshot_sort_rows` and the statement fails with
MySQL's "Out of sort memory" (1038) past it, naming the key, rather than spilling to disk: the
tools that read snapshots read in key order (that costs nothing), an ad-hoc ORDER BY is for
small tables, and `ORDER BY … LIMIT n` holds only `offset + n` rows (a bounded heap) whatever
the table's size. Ties keep key order (MySQL leaves their order open)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from functools import total_ordering

from cdc.protocol.sql_error import SqlError

ER_OUT_OF_SORTMEMORY = 1038
Fields = list  # a row's text fields (bytes | None), as a page's split_fields gives them


@total_ordering
class _Descending:
    """A value whose order is reversed (DESC) without negating it (bytes have no minus)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    def __lt__(self, other: _Descending) -> bool:
        return other.value < self.value  # type: ignore[operator]


def row_order(
    columns: list[tuple[int, bool, Callable[[bytes], object]]],
) -> Callable[[Fields], tuple]:
    """The sort key of a row: per (field index, descending, the field's order key) a NULL
    before any value ascending (after them descending), as MySQL sorts."""

    def key(fields: Fields) -> tuple:
        out = []
        for at, descending, value_key in columns:
            text = fields[at]
            part = (0,) if text is None else (1, value_key(text))
            out.append(_Descending(part) if descending else part)
        return tuple(out)

    return key


class Sorter:
    """Collects rows and gives them back sorted; keeps only the first `keep` (a heap) when the
    statement has a LIMIT, and refuses to hold more than `max_rows`."""

    def __init__(self, key: Callable[[Fields], tuple], max_rows: int, keep: int | None) -> None:
        self.key = key
        self.max_rows = max_rows
        self.keep = keep
        self._rows: list[tuple[tuple, int, Fields]] = []
        self._seq = 0  # arrival order: ties stay in key order

    def add(self, rows: Iterable[Fields]) -> None:
        keep, held = self.keep, self._rows
        for fields in rows:
            self._seq += 1
            if keep is None:
                held.append((self.key(fields), self._seq, fields))
                if len(held) > self.max_rows:
                    raise self._too_many()
                continue
            # A max-heap of the best `keep` by (key, seq), spelled with negated seq on a
            # min-heap of descending keys.
            entry = (_Descending((self.key(fields), self._seq)), 0, fields)
            if len(held) < keep:
                heapq.heappush(held, entry)  # type: ignore[arg-type]
            elif keep and entry[0] > held[0][0]:
                heapq.heapreplace(held, entry)  # type: ignore[arg-type]

    def _too_many(self) -> SqlError:
        return SqlError(
            f"Out of sort memory: ORDER BY other than the primary key holds the rows in memory, "
            f"and this one has more than [dumper] snapshot_sort_rows ({self.max_rows}); add a "
            "LIMIT, order by the primary key, or raise the key",
            ER_OUT_OF_SORTMEMORY,
            "HY001",
        )

    def sorted(self) -> list[Fields]:
        if self.keep is None:
            self._rows.sort(key=lambda e: (e[0], e[1]))
            return [fields for _, _, fields in self._rows]
        ordered = sorted(self._rows, key=lambda e: e[0].value)  # type: ignore[union-attr]
        return [fields for _, _, fields in ordered]


def check_keep(keep: int | None, max_rows: int) -> None:
    """A LIMIT whose rows alone pass the bound is refused before anything is read."""
    if keep is not None and keep > max_rows:
        raise Sorter(lambda f: (), max_rows, None)._too_many()
