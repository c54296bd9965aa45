"""The pure parts of snapshot reads (docs/snapshot-reads.md): the chunk rule against a model
of the table under changes, WHERE to SQL and over before-images, values as the text protocol
spells them, the SELECT parser and its refusals."""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from cdc.binlog.row_image import Date, DateTime, Timestamp
from cdc.protocol.constants import ColumnType
from cdc.sql_literal import sql_identifier
from dumper.server.handlers import SqlError
from dumper.server.sql.parser import parse
from dumper.server.sql.statements import Compare, InfoSchemaSelect, Select, TableSelect
from read_path.chunks import chunk_bound, take_chunk, take_until
from read_path.order import Sorter, row_order
from read_path.values import ColumnDef, order_key, sort_key, text_row, text_value
from read_path.where import matches, to_sql

T = ColumnType


def col(type_: int, *, flags: int = 0, decimals: int = 0, length: int = 11, charset: int = 45):
    return ColumnDef(b"d", b"t", b"t", b"c", b"c", charset, length, type_, flags, decimals, b"\0\0")


# -- the chunk rule -----------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    at_p=hs.dictionaries(hs.integers(0, 60), hs.integers(0, 3), max_size=40),
    moves=hs.lists(hs.tuples(hs.integers(0, 60), hs.integers(-1, 3)), max_size=30),
    shards=hs.integers(1, 4),
    page=hs.integers(1, 7),
    seed=hs.randoms(use_true_random=False),
)
def test_chunks_give_the_table_at_p_under_any_interleaving(at_p, moves, shards, page, seed):
    """A model: keys live in shards (value = shard); after P, changes (`moves`: a key goes to
    a shard, or -1 = deleted) happen at random moments between page reads. Whatever the reads
    saw, the chunks give every key at P once, in order."""
    at_p = {k: s % shards for k, s in at_p.items()}
    live = dict(at_p)
    changed: dict[tuple[int], object] = {}
    pending = list(moves)

    def some_changes():
        for _ in range(seed.randint(0, 2)):
            if not pending:
                return
            key, shard = pending.pop(0)
            changed.setdefault((key,), ("row", key) if key in at_p else None)
            if shard < 0:
                live.pop(key, None)
            else:
                live[key] = shard % shards

    def read_page(shard, after):
        keys = sorted(k for k, s in live.items() if s == shard and (after is None or (k,) > after))
        return [((k,), ("row", k)) for k in keys[:page]]

    buffers: list[list] = [[] for _ in range(shards)]
    lasts, exhausted = [None] * shards, [False] * shards

    def fill():  # the read's schedule: a page for every shard holding less than one
        for i in range(shards):
            if exhausted[i] or len(buffers[i]) >= page:
                continue
            some_changes()
            rows = read_page(i, lasts[i])
            buffers[i].extend(rows)
            exhausted[i] = len(rows) < page
            if rows:
                lasts[i] = rows[-1][0]

    # The reads run ahead (read_ahead.py): chunks are closed (bound, rows, H) and queued while
    # earlier ones wait for their watermark; a chunk is emitted with the map as it is then,
    # which holds every change before its H (and maybe later ones: harmless, see changes.py).
    fill()
    queued, out, lo, closed = [], [], None, False
    while not closed or queued:
        if not closed and (not queued or seed.random() < 0.6):
            hi = chunk_bound(lasts, exhausted)
            current = [take_until(buf, hi) for buf in buffers]
            assert all(len(rows) < 2 * page for rows in current)  # a shard's share of a chunk
            some_changes()  # before H
            queued.append((hi, current, dict(changed)))
            closed = hi is None
            fill()  # after H: only keys above hi
            assert all(not buf or buf[0][0] > hi for buf in buffers if hi is not None)
            continue
        hi, current, at_h = queued.pop(0)
        some_changes()  # after H
        assert at_h.items() <= changed.items()  # a key's entry never changes once set
        chunk = take_chunk(current, lo, hi, dict(changed), lambda image: image)
        out.extend(chunk)
        lo = hi
    assert [k for (k,), _ in out] == sorted(at_p)
    assert all(payload == ("row", k) for (k,), payload in out)


def test_chunk_drops_rows_that_fail_the_where():
    buffers = [[((1,), "a"), ((5,), "b")]]
    changed = {(1,): "old1", (3,): "old3", (9,): "old9"}
    got = take_chunk(buffers, None, (5,), changed, lambda img: None if img == "old3" else img)
    assert got == [((1,), "old1"), ((5,), "b")]  # 9 is the next chunk's


# -- WHERE ----------------------------------------------------------------------------------------
def test_where_to_sql_and_over_images():
    stmt = parse(
        "SELECT * FROM bank.accounts WHERE id BETWEEN 2 AND 9 AND NOT (balance < 10 OR "
        "note IS NULL) AND name IN ('a''b', 'X ') AND 5 < id"
    )
    assert isinstance(stmt, TableSelect)
    assert to_sql(stmt.where) == (
        "(`id` BETWEEN 2 AND 9 AND NOT ((`balance` < 10 OR `note` IS NULL)) AND "
        "`name` IN ('a\\'b', 'X ') AND `id` > 5)"  # cdc.sql_literal's escape of the quote
    )
    # The one identifier quoting (cdc.sql_literal; the read path, flashback, backfill): a backtick
    # in a name is doubled, as MariaDB reads it back.
    assert sql_identifier("a`b") == "`a``b`" and sql_identifier("") == "``"
    cols = {
        "id": col(T.LONG),
        "balance": col(T.LONGLONG),
        "note": col(T.VAR_STRING),
        "name": col(T.VAR_STRING),
    }

    def row(**values):
        return lambda c: (cols[c], values.get(c))

    assert matches(stmt.where, row(id=b"7", balance=b"10", note=b"n", name=b"x"))
    assert not matches(stmt.where, row(id=b"7", balance=b"9", note=b"n", name=b"x"))
    assert not matches(stmt.where, row(id=b"7", balance=b"10", note=None, name=b"x"))
    assert not matches(stmt.where, row(id=b"5", balance=b"10", note=b"n", name=b"x"))
    assert matches(stmt.where, row(id=b"6", balance=b"10", note=b"n", name=b"A'B"))
    assert not matches(Compare("id", "=", None), row(id=b"1"))  # NULL: unknown, not true


# -- values -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("column", "value", "text"),
    [
        (col(T.LONG, flags=0x20), -1, b"4294967295"),  # no signedness in the table map
        (col(T.LONGLONG), -5, b"-5"),
        (col(T.NEWDECIMAL), Decimal("12.50"), b"12.50"),
        (
            col(T.DATETIME2, decimals=6),
            DateTime(2026, 1, 2, 3, 4, 5, 60),
            b"2026-01-02 03:04:05.000060",
        ),
        (col(T.DATETIME2, decimals=0), DateTime(2026, 1, 2, 3, 4, 5), b"2026-01-02 03:04:05"),
        (col(T.DATE), Date(2026, 11, 25), b"2026-11-25"),
        (col(T.TIMESTAMP2), Timestamp(0), b"0000-00-00 00:00:00"),
        (col(T.TIMESTAMP2, decimals=2), Timestamp(86400, 120000), b"1970-01-02 00:00:00.12"),
        (col(T.TIME2), -dt.timedelta(hours=26, seconds=1), b"-26:00:01"),
        (col(T.DOUBLE), 0.1, b"0.1"),
        (col(T.DOUBLE), 1e20, b"1e20"),
        (col(T.FLOAT), struct.unpack("<f", struct.pack("<f", 1.1))[0], b"1.1"),
        (col(T.STRING, flags=0x100), 2, b"silver"),
        (col(T.STRING, flags=0x800), 5, b"basic,gold"),
        (col(T.BLOB, charset=63), b"\x00\xff", b"\x00\xff"),
        (col(T.YEAR), 2024, b"2024"),
        (col(T.LONG), None, None),
    ],
)
def test_text_values(column, value, text):
    assert text_value(column, value, ("basic", "silver", "gold")) == text


def _f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


# As MariaDB 10.11 prints them in the text protocol (read back from a FLOAT and a DOUBLE
# column): a FLOAT rounded to 6 digits, a DOUBLE with the fewest that read back the same, fixed
# notation unless past 15 digits (or 14 zeros after the point).
@pytest.mark.parametrize(
    ("type_", "value", "text"),
    [
        (T.FLOAT, _f32(3 / 7), b"0.428571"),
        (T.FLOAT, _f32(123456789), b"123457000"),
        (T.FLOAT, _f32(16777217), b"16777200"),
        (T.FLOAT, _f32(3e9), b"3000000000"),
        (T.FLOAT, _f32(1e15), b"1e15"),
        (T.FLOAT, _f32(-3.4e38), b"-3.4e38"),
        (T.FLOAT, _f32(1.23456789e-7), b"0.000000123457"),
        (T.FLOAT, _f32(3.11295e-18), b"3.11295e-18"),
        (T.FLOAT, -0.0, b"0"),
        (T.DOUBLE, 3 / 7, b"0.42857142857142855"),
        (T.DOUBLE, 1626983080611305.8, b"1626983080611305.8"),
        (T.DOUBLE, 5370398386766039.0, b"5.370398386766039e15"),
        (T.DOUBLE, 1e-5, b"0.00001"),
        (T.DOUBLE, 1e10, b"10000000000"),
    ],
)
def test_floats_as_mariadb_prints_them(type_, value, text):
    assert text_value(col(type_), value) == text


def test_exact_float_keeps_every_bit():
    """A binary read's FLOAT (its pages read it as a DOUBLE): the text gives back its 4 bytes."""
    for value in (3 / 7, 0.1, 16777217.0, 1.17549e-38, -3.4e38):
        stored = struct.pack("<f", value)
        text = text_value(col(T.FLOAT), _f32(value), exact_float=True)
        assert struct.pack("<f", float(text)) == stored


# The order MariaDB 10.11 gave these strings (ORDER BY the column, then id) under its default
# collation, utf8mb4_general_ci (45), and under utf8mb4_bin (46): case and accents, PAD SPACE.
WORDS = ["a", "B", "é", "e", "E", "f", "ß", "s", "Z", "á", "b ", "b", "ä", "A", "z", "ss", "Æ"]
WORDS += ["ae", "Ø", "o", "ı", "i", "I", "İ", "😀", "\t", "a\t", ""]
GENERAL_CI = "\t,,a\t,a,á,ä,A,ae,B,b ,b,é,e,E,f,ı,i,I,İ,o,ß,s,ss,Z,z,Æ,Ø,😀"
UTF8MB4_BIN = "\t,,A,B,E,I,Z,a\t,a,ae,b ,b,e,f,i,o,s,ss,z,Æ,Ø,ß,á,ä,é,İ,ı,😀"


@pytest.mark.parametrize(("collation", "order"), [(45, GENERAL_CI), (46, UTF8MB4_BIN)])
def test_strings_sort_as_mariadb_sorts_them(collation, order):
    column = col(T.VAR_STRING, charset=collation)
    ids = sorted(range(len(WORDS)), key=lambda i: (sort_key(column, WORDS[i].encode()), i))
    assert ",".join(WORDS[i] for i in ids) == order
    binary = col(T.BLOB, charset=63)
    assert sort_key(binary, b"a ") > sort_key(binary, b"a") > sort_key(binary, b"B")


def test_a_declared_collation_orders_and_spells_its_values():
    """The table's declared collation, not the packet's (the connection's): utf8mb4_unicode_ci
    weighs ß as ss (general_ci as s); a latin1 before-image's bytes are sent as the DN sends
    the column on the readers' utf8mb4 connection; PAD SPACE as MariaDB pads (`a\t` < `a` =
    `a ` < `a!`); an unknown collation is refused naming it."""
    unicode_ci = replace(col(T.VAR_STRING), declared="utf8mb4_unicode_ci")
    assert sort_key(unicode_ci, "ß".encode()) == sort_key(unicode_ci, b"ss")
    assert sort_key(col(T.VAR_STRING), "ß".encode()) == sort_key(col(T.VAR_STRING), b"s")
    latin1 = replace(col(T.VAR_STRING), declared="latin1_swedish_ci")
    assert text_value(latin1, b"\xdd\x80") == "Ý€".encode()
    assert sort_key(latin1, "Ý".encode()) == sort_key(latin1, b"Y")
    spaced = sorted([b"a!", b"a ", b"a\t"], key=lambda t: sort_key(col(T.VAR_STRING), t))
    assert spaced == [b"a\t", b"a ", b"a!"]
    assert sort_key(col(T.VAR_STRING), b"a ") == sort_key(col(T.VAR_STRING), b"a")
    german = replace(col(T.VAR_STRING), declared="utf8mb4_german2_ci")
    with pytest.raises(SqlError, match="utf8mb4_german2_ci") as err:
        sort_key(german, b"a")
    assert err.value.code == 1235


def test_enum_and_set_order_by_their_numbers():
    """ORDER BY an ENUM follows its members' order ('' first), a SET its bits' number."""
    members = ("basic", "silver", "gold")
    enum = order_key(col(T.STRING, flags=0x100), members)
    assert sorted([b"gold", b"basic", b"", b"silver"], key=enum) == [
        b"",
        b"basic",
        b"silver",
        b"gold",
    ]
    bits = order_key(col(T.STRING, flags=0x800), members)
    values = [b"gold", b"basic,silver", b"silver", b""]
    assert sorted(values, key=bits) == [b"", b"silver", b"basic,silver", b"gold"]


def test_where_compares_under_the_collation():
    """A before-image's value against a literal, as the DN compares them (case, accents and
    trailing spaces ignored under utf8mb4_general_ci; trailing spaces under utf8mb4_bin)."""
    where = parse("SELECT * FROM t WHERE name = 'E '").where
    names = [b"e", "\u00e9".encode(), b"E", b"E  ", b"E ", b"f"]
    for charset, matching in ((45, names[:5]), (46, names[2:5]), (63, [b"E "])):
        column = col(T.VAR_STRING, charset=charset)
        assert [n for n in names if matches(where, lambda c, n=n, k=column: (k, n))] == matching


def test_column_def_round_trip_and_rename():
    packet = (
        b"\x03def\x06bank_p\x0eaccounts_p0001\x0eaccounts_p0001\x02id\x02id"
        + struct.pack("<BHIBHB", 0x0C, 63, 10, 3, 0x4223, 0)
        + b"\0\0"
    )
    c = ColumnDef.parse(packet)
    assert c.encode() == packet
    renamed = c.renamed("bank", "accounts", "a").encode()
    assert renamed.startswith(b"\x03def\x04bank\x01a\x08accounts\x02id\x02id")
    assert text_row([b"1", None, b""]) == b"\x011\xfb\x00"


# -- the parser -----------------------------------------------------------------------------------
def test_parse_surface():
    s = parse(
        "select id, balance as b, t.x from bank.accounts t where id >= 3 order by id limit 2, 5"
    )
    assert isinstance(s, TableSelect)
    assert (s.db, s.table, s.alias, s.limit, s.offset) == ("bank", "accounts", "t", 5, 2)
    assert [(i.kind, i.column, i.name) for i in s.items] == [
        ("column", "id", "id"),
        ("column", "balance", "b"),
        ("column", "x", "x"),
    ]
    c = parse("SELECT COUNT(*), MIN(id), max(id) FROM accounts")
    assert [(i.kind, i.name) for i in c.items] == [
        ("COUNT", "COUNT(*)"),
        ("MIN", "MIN(id)"),
        ("MAX", "max(id)"),
    ]
    # what kept its own answers
    assert isinstance(parse("SELECT * FROM information_schema.tables"), InfoSchemaSelect)
    assert isinstance(parse("SELECT 1 FROM dual"), Select)
    assert isinstance(parse("SELECT @@version"), Select)


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("SELECT * FROM a JOIN b ON a.id = b.id", "a join"),
        ("SELECT * FROM a, b", "a join"),
        ("SELECT * FROM (SELECT id FROM t ORDER BY id LIMIT 9) AS T", "derived table"),
        ("SELECT id FROM (SELECT id FROM t) T", "derived table"),
        ("SELECT MAX(id) FROM (SELECT MAX(id) FROM t) T", "derived table"),
        ("SELECT MAX(id) FROM (SELECT id FROM (SELECT id FROM u) x) T", "inside a derived"),
        ("SELECT MAX(id) FROM (SELECT id FROM t LIMIT 3) T WHERE id > 1", "after a derived"),
        ("SELECT MAX(id) FROM (SELECT id FROM t LIMIT 3) T, u", "after a derived"),
        ("SELECT * FROM t WHERE id IN (SELECT id FROM u)", "subquery in WHERE"),
        ("SELECT NOW() FROM t", "function NOW()"),
        ("SELECT * FROM t WHERE LOWER(x) = 'a'", "function LOWER()"),
        ("SELECT id + 1 FROM t", "operator '+'"),
        ("SELECT a, COUNT(*) FROM t", "beside aggregates"),
        ("SELECT * FROM t GROUP BY a", "GROUP BY"),
        ("SELECT * FROM t FOR UPDATE", "locking read"),
        ("SELECT * FROM t WHERE a = b", "two columns"),
        ("SELECT DISTINCT a FROM t", "DISTINCT"),
        ("SELECT * FROM t WHERE a LIKE 'x%'", "LIKE"),
    ],
)
def test_refusals_name_the_construct(sql, named):
    with pytest.raises(SqlError) as err:
        parse(sql)
    assert err.value.code == 1235
    assert named in err.value.message


def test_parse_flink_split_query():
    """Flink CDC's `queryNextChunkMax`: the aggregate folds the inner SELECT's first rows."""
    s = parse(
        "SELECT MAX(`id`) FROM (SELECT `id` FROM `bank`.`accounts` WHERE `id` >= 17 "
        "ORDER BY `id` ASC LIMIT 8096) AS T"
    )
    assert isinstance(s, TableSelect)
    assert (s.db, s.table, s.alias, s.first, s.limit) == ("bank", "accounts", "T", 8096, None)
    assert s.where == Compare("id", ">=", 17)
    assert s.order_by == [("id", False)]
    assert [(i.kind, i.column, i.name) for i in s.items] == [("MAX", "id", "MAX(`id`)")]
    aliased = parse("SELECT MIN(k), COUNT(*) FROM (SELECT id AS k FROM t LIMIT 5) x")
    assert [(i.kind, i.column) for i in aliased.items] == [("MIN", "id"), ("COUNT", None)]
    with pytest.raises(SqlError) as err:
        parse("SELECT MAX(id) FROM (SELECT id FROM t LIMIT 5)")
    assert err.value.code == 1248
    with pytest.raises(SqlError) as err:
        parse("SELECT MAX(nope) FROM (SELECT id FROM t LIMIT 5) T")
    assert err.value.code == 1054


def test_sorter_orders_as_mysql_and_bounds_memory():
    key = row_order([(0, False, int), (1, True, bytes)])
    rows = [[b"2", b"b"], [None, b"z"], [b"1", b"a"], [b"2", None], [b"2", b"c"], [b"1", b"a"]]
    everything = Sorter(key, 100, None)
    everything.add(rows)
    expected = [[None, b"z"], [b"1", b"a"], [b"1", b"a"], [b"2", b"c"], [b"2", b"b"], [b"2", None]]
    assert everything.sorted() == expected
    for keep in range(0, 7):  # LIMIT: a bounded heap gives the same first rows
        top = Sorter(key, 3, keep)
        top.add(rows)
        assert top.sorted() == expected[:keep]
    full = Sorter(key, 5, None)
    with pytest.raises(SqlError) as err:
        full.add(rows)
    assert err.value.code == 1038 and "snapshot_sort_rows (5)" in err.value.message


def test_numeric_comparison_reads_a_string_as_mysql_does():
    stmt = parse("SELECT * FROM t WHERE id = '1'' OR 1=1 -- '")
    column = col(T.LONG)
    assert matches(stmt.where, lambda c: (column, b"1"))
    assert not matches(stmt.where, lambda c: (column, b"0"))
    assert matches(parse("SELECT * FROM t WHERE id = 'abc'").where, lambda c: (column, b"0"))
    assert matches(parse("SELECT * FROM t WHERE id < ' 2.5e1x'").where, lambda c: (column, b"24"))


# -- a past point's shape across DDL (read_path/past_shape.py) ---------------------------------
def _c(name: str, type_: str = "int(11)", key: str = "", nullable: bool = True) -> dict:
    return {"name": name, "type": type_, "key": key, "nullable": nullable, "charset": None}


_AT_P = {"columns": [_c("id", "bigint(20)", "PRI", False), _c("n"), _c("s", "varchar(16)")]}


def _after(*columns: dict) -> dict:
    return {"columns": list(columns)}


_ID, _N, _S = _AT_P["columns"]


def test_a_past_shape_crosses_ddl_that_destroys_nothing():
    from read_path.first_images import Shape
    from read_path.past_shape import shape_at

    added = _after(_ID, _N, _S, _c("note", "varchar(20)"))
    indexed = _after(_ID, {**_N, "key": "MUL", "default": "7"}, _S, _c("note", "varchar(20)"))
    moved = _after(_ID, _c("note", "varchar(20)"), _S, _N)
    shape = shape_at(
        _AT_P,
        [("ALTER … ADD COLUMN note", added), ("ADD INDEX", indexed), ("MODIFY … AFTER", moved)],
    )
    assert shape.names == ["id", "n", "s"]
    assert shape.later == [
        Shape("ALTER … ADD COLUMN note", 4, [0, 1, 2]),
        Shape("ADD INDEX", 4, [0, 1, 2]),
        Shape("MODIFY … AFTER", 4, [0, 3, 2]),
    ]
    assert shape_at(_AT_P, [("COMMENT", _after(_ID, _N, _S))]).later[0].picks is None


def test_a_widened_column_is_described_as_it_was_at_the_point():
    """INT → BIGINT and VARCHAR(16) → VARCHAR(32) keep every value of P, spelled the same:
    crossed, the DN's packets of the wider types turned back into the old ones'."""
    from read_path.past_shape import shape_at

    wider = _after(_ID, {**_N, "type": "bigint(20)"}, {**_S, "type": "varchar(32)"})
    shape = shape_at(_AT_P, [("widen", wider), ("again", wider)])
    assert shape.widened == {"n": ("int(11)", "bigint(20)"), "s": ("varchar(16)", "varchar(32)")}
    n = shape.as_at_p(col(T.LONGLONG, length=20), "N")
    assert (n.type, n.length) == (T.LONG, 11)
    s = shape.as_at_p(col(T.VAR_STRING, length=128), "s")  # 32 characters of 4 bytes
    assert (s.type, s.length) == (T.VAR_STRING, 64)
    assert shape.as_at_p(col(T.LONGLONG, flags=1), "id") == col(T.LONGLONG, flags=1)
    assert shape.as_at_p(col(T.LONGLONG), None) == col(T.LONGLONG)  # COUNT(*)
    # NOT NULL → NULL: crossed, the column's packet NOT NULL as at P (not a MIN/MAX's).
    strict = {"columns": [_ID, {**_N, "nullable": False}, _S]}
    loose = shape_at(strict, [("NULL", _after(_ID, _N, _S))])
    assert loose.as_at_p(col(T.LONG), "n").flags & 1
    assert not loose.as_at_p(col(T.LONG), "n", column=False).flags & 1
    # Widened and back: the packets now are the type of P's already.
    assert shape_at(_AT_P, [("widen", wider), ("back", _AT_P)]).widened == {}


@pytest.mark.parametrize(
    ("ddls", "index", "why"),
    [
        ([("TRUNCATE TABLE t", _AT_P)], 0, "emptied"),
        ([("ADD COLUMN x", _after(_ID, _N, _S, _c("x"))), ("DROP TABLE t", {})], 1, "dropped the"),
        ([("DROP COLUMN s", _after(_ID, _N))], 0, "column s"),
        ([("CHANGE s t", _after(_ID, _N, {**_S, "name": "t"}))], 0, "column s"),
        ([("to text", _after(_ID, {**_N, "type": "varchar(11)"}, _S))], 0, "n's type"),
        ([("unsigned", _after(_ID, {**_N, "type": "int(10) unsigned"}, _S))], 0, "n's type"),
        ([("tiny", _after(_ID, {**_N, "type": "tinyint(4)"}, _S))], 0, "n's type"),
        ([("narrow", _after(_ID, _N, {**_S, "type": "varchar(8)"}))], 0, "s's type"),
        ([("NOT NULL", _after(_ID, {**_N, "nullable": False}, _S))], 0, "n NOT NULL"),
        ([("PRIMARY KEY", _after({**_ID, "key": ""}, {**_N, "key": "PRI"}, _S))], 0, "primary"),
    ],
)
def test_a_past_shape_refuses_ddl_that_destroyed_what_it_needs(ddls, index, why):
    from read_path.past_shape import Destroyed, shape_at

    with pytest.raises(Destroyed) as refused:
        shape_at(_AT_P, ddls)
    assert refused.value.index == index and why in refused.value.why
    with pytest.raises(Destroyed, match="did not exist"):  # a point before the CREATE
        shape_at(None, [("CREATE TABLE t", _AT_P)])


def test_a_ddl_crossed_takes_its_shape_and_one_not_foreseen_fails_the_read():
    from read_path.first_images import Shape, TableChangedByDdl, TableChanges

    table = TableChanges("d", "t", [0], tuple, 3, later=[Shape("ALTER x", 4, [0, 1, 2])])
    table.crossed("d-bin.000001:4", " ALTER x")
    assert (table.columns, table.picks, table.later) == (4, [0, 1, 2], [])
    with pytest.raises(TableChangedByDdl):
        table.crossed("d-bin.000001:99", "ALTER y")
