"""`SourceProcessor._rename`: the physical TABLE_MAPs of released statements replaced by their
logical ones in place, and a table without a logical name dropped with its rows (also in a later
statement of the same fragment, until its id is mapped again), as the list-building loop it
replaced did, on random statements."""

from __future__ import annotations

import random

from cdc.binlog import constants
from merge_source.fragment import Statement
from merge_source.processor import SourceProcessor

TABLE_MAP, ROWS = constants.EventType.TABLE_MAP, constants.EventType.WRITE_ROWS


def event(code: int, table_id: int, serial: int) -> bytes:
    return bytes(4) + bytes((code,)) + bytes(14) + table_id.to_bytes(6, "little") + b"%d" % serial


class Names:
    """A NameMap's interface: table ids in `unmapped` have no logical name."""

    def __init__(self, unmapped: set[int]):
        self.unmapped = unmapped
        self.unreported: set = set()
        self.dropped = 0

    def rename(self, table_map: bytes) -> bytes | None:
        if int.from_bytes(table_map[19:25], "little") in self.unmapped:
            self.dropped += 1
            return None
        return b"renamed:" + table_map


def reference(names: Names, statements: list[list[bytes]]) -> list[list[bytes]]:
    """The loop before the in-place renaming (one new list per statement)."""
    out, dropped = [], set()
    for source in statements:
        events = []
        for e in source:
            if e[4] == TABLE_MAP:
                renamed = names.rename(e)
                if renamed is None:
                    dropped.add(e[19:25])
                    continue
                dropped.discard(e[19:25])
                events.append(renamed)
            elif e[19:25] not in dropped:
                events.append(e)
        if events:
            out.append(events)
    return out


def test_renamed_in_place_as_the_list_building_loop_did():
    rng = random.Random(43)
    for _ in range(2000):
        statements = [
            [
                event(TABLE_MAP if rng.random() < 0.4 else ROWS, rng.randrange(4), serial)
                for serial in range(rng.randrange(1, 7))
            ]
            for _ in range(rng.randrange(1, 5))
        ]
        unmapped = {t for t in range(4) if rng.random() < 0.3}
        expected = reference(Names(unmapped), [list(s) for s in statements])
        processor = SourceProcessor(1)
        processor.names = Names(unmapped)
        got = processor._rename([Statement((1, n), list(s)) for n, s in enumerate(statements)])
        assert [st.in_memory for st in got] == expected
