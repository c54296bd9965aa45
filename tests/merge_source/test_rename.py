"""`SourceProcessor._rename`: the physical TABLE_MAPs of released statements replaced by their
logical ones in place, and a table without a logical name dropped with its rows (also in a later
statement of the same fragment, until its id is mapped again), as the list-building loop it
replaced did, on random statements."""

from __future__ import annotations

import random

from cdc.binlog import constants
from merge_source.fragment import Statement
from merge_source.processor import SourceProcessor
from merge_source.renamer import NameMap, PackedRenamer

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
        events = reference_of(names, source, dropped)
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


def table_map(table_id: int, db: bytes, table: bytes, stamp: int) -> bytes:
    """A TABLE_MAP event, its header's timestamp and log_pos `stamp` (they change every time)."""
    body = table_id.to_bytes(6, "little") + b"\1\0" + bytes((len(db),)) + db + b"\0"
    body += bytes((len(table),)) + table + b"\0" + b"\2\3\3\0"
    size = 19 + len(body) + 4
    head = stamp.to_bytes(4, "little") + bytes((TABLE_MAP,)) + bytes(4)
    head += size.to_bytes(4, "little") + stamp.to_bytes(4, "little") + b"\0\0"
    return head + body + stamp.to_bytes(4, "little")  # a CRC that changes too


def rows(table_id: int, serial: int) -> bytes:
    data = bytes(4) + bytes((ROWS,)) + bytes(4) + bytes(10) + table_id.to_bytes(6, "little")
    data += b"row%d" % serial
    return data[:9] + len(data).to_bytes(4, "little") + data[13:]


def test_packed_renamer_answers_as_the_name_map():
    """`PackedRenamer` (a MergeSource process's packed statements, answers by table id) gives
    the bytes NameMap.rename and the list loop give, repeats, reused ids and dropped tables
    included, and counts the drops as the map does."""
    topology = {
        "tables": [
            {"db": "d", "table": "t", "physical": [{"dn": 1, "db": "d_p0", "table": "t_p0"}]},
            {"db": "d", "table": "u", "physical": [{"dn": 1, "db": "d_p0", "table": "u_p00"}]},
        ]
    }
    tables = [(b"d_p0", b"t_p0"), (b"d_p0", b"u_p00"), (b"d_p0", b"gone")]
    rng = random.Random(7)
    for _ in range(300):
        plain, packed = NameMap.from_topology(1, topology), NameMap.from_topology(1, topology)
        renamer = PackedRenamer(packed)
        dropped_a: set = set()
        dropped_b: set = set()
        for _ in range(rng.randrange(1, 6)):
            events = []
            for _ in range(rng.randrange(1, 4)):
                table_id = rng.randrange(1, 4)
                db, table = tables[rng.randrange(3)] if rng.random() < 0.3 else tables[table_id - 1]
                events.append(table_map(table_id, db, table, rng.randrange(1 << 30)))
                events += [rows(table_id, rng.randrange(100)) for _ in range(rng.randrange(3))]
            expected = reference_of(plain, events, dropped_a)
            assert renamer.rename(b"".join(events), dropped_b) == b"".join(expected)
            assert dropped_b == dropped_a
        assert packed.dropped == plain.dropped
        assert packed.unreported == plain.unreported


def reference_of(names: Names | NameMap, events: list[bytes], dropped: set) -> list[bytes]:
    """One statement's events renamed as the loop before did; `dropped`: the table ids whose
    TABLE_MAP was dropped (their rows go too), carried from statement to statement."""
    out = []
    for e in events:
        if e[4] == TABLE_MAP:
            renamed = names.rename(e)
            if renamed is None:
                dropped.add(e[19:25])
                continue
            dropped.discard(e[19:25])
            out.append(renamed)
        elif e[19:25] not in dropped:
            out.append(e)
    return out
