"""Strings ordered under each collation a table can have, against MariaDB's own ORDER BY
(docs/snapshot-reads.md, "ORDER BY"; read_path/collation.py): a logical table whose
primary key is a string in that collation, sharded in 8 partitions on 2 DNs, read through the
dumper in key order, in ORDER BY DESC, and by MIN/MAX, each against the same rows in one table
on a DN (a temporary table, not binlogged, so the pipeline never sees it). The values hit the
collations' differences: case, accents, ß and ẞ, ligatures, trailing spaces and characters
below a space, symbols, Ý/Ü in Swedish, characters past the BMP. The WHERE a before-image is
tested with is checked the same way, in process, against the DN's answer for every collation
the dumper supports; another collation is refused with 1235 naming it."""

from __future__ import annotations

import asyncio
import contextlib
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator

import pymysql
import pytest

from cdc_equipment.cn import ComputeNode
from dumper.server.sql.parser import parse
from read_path.collation import collation
from read_path.values import ColumnDef
from read_path.where import matches

pytestmark = pytest.mark.timeout(300)

DB = "coll"
WORDS = ["a", "A", "á", "ä", "Ä", "å", "Å", "aa", "ae", "æ", "Æ", "b", "B ", "b\t", "b!", "bc"]
WORDS += ["ß", "ẞ", "ss", "s", "sz", "œ", "oe", "ø", "ö", "o", "ı", "i", "I", "İ", "ǅ", "dž"]
WORDS += ["Ý", "Y", "y", "Ü", "U", "ü", "þ", "th", "ð", "d", "ﬁ", "fi", "½", "1", "€", "#"]
WORDS += ["-a", "a-b", "z", "Z", "", " x", "\u00a0", "x\u0301", "😀", "😁", "𝒜", "中", "丁"]
# The collations read through the dumper (a table each); the in-process WHERE check takes every
# one `collation()` supports.
THROUGH_DUMPER = [
    ("utf8mb4", "utf8mb4_general_ci"),
    ("utf8mb4", "utf8mb4_unicode_ci"),
    ("utf8mb4", "utf8mb4_unicode_520_ci"),
    ("utf8mb4", "utf8mb4_bin"),
    ("utf8mb4", "utf8mb4_unicode_520_nopad_ci"),
    ("latin1", "latin1_swedish_ci"),
    ("latin1", "latin1_bin"),
    ("ascii", "ascii_general_ci"),
    ("binary", "binary"),
]
IN_PROCESS = THROUGH_DUMPER + [
    ("utf8mb3", "utf8mb3_general_ci"),
    ("utf8mb4", "utf8mb4_general_nopad_ci"),
    ("utf8mb4", "utf8mb4_unicode_nopad_ci"),
    ("utf8mb4", "utf8mb4_nopad_bin"),
    ("utf8mb3", "utf8mb3_unicode_ci"),
    ("utf8mb3", "utf8mb3_unicode_520_ci"),
    ("utf8mb3", "utf8mb3_bin"),
    ("latin1", "latin1_swedish_nopad_ci"),
    ("latin1", "latin1_nopad_bin"),
    ("ascii", "ascii_bin"),
]


def _storable(charset: str) -> list[str]:
    """The words a column of `charset` stores as they are."""
    codec = {"utf8mb4": "utf-8", "binary": "utf-8", "latin1": "cp1252", "ascii": "ascii"}
    out = []
    for w in WORDS:
        if charset == "utf8mb3" and any(ord(c) > 0xFFFF for c in w):
            continue
        try:
            w.encode(codec.get(charset, "utf-8"))
        except UnicodeEncodeError:
            continue
        out.append(w)
    return out


def _column(charset: str, name: str) -> str:
    if charset == "binary":
        return "s VARBINARY(64) NOT NULL"
    return f"s VARCHAR(16) CHARACTER SET {charset} COLLATE {name} NOT NULL"


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@contextlib.contextmanager
def _scratch(snap, table: str, columns: str) -> Iterator[pymysql.cursors.Cursor]:
    """A cursor on DN 0 with a temporary table `mysql.<table>` (not binlogged: the pipeline
    never sees it)."""
    conn = snap.dn(0)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"CREATE TEMPORARY TABLE mysql.{table} ({columns})")
            yield cur
    finally:
        conn.close()


def _reference(snap, charset: str, name: str) -> tuple[list[str], tuple[str, str]]:
    """(the words a primary key in this collation keeps, one of each equal set, in MariaDB's
    ORDER BY; their MIN and MAX), from a temporary table on a DN."""
    with _scratch(snap, "ref", f"{_column(charset, name)}, PRIMARY KEY (s)") as cur:
        for w in _storable(charset):
            cur.execute("INSERT IGNORE INTO mysql.ref VALUES (%s)", (w,))
        cur.execute("SELECT s FROM mysql.ref ORDER BY s")
        order = [_text(r[0]) for r in cur.fetchall()]
        cur.execute("SELECT MIN(s), MAX(s) FROM mysql.ref")
        low, high = cur.fetchone()
    return order, (_text(low), _text(high))


async def _create(cn: ComputeNode, tables: dict[str, tuple[str, str, list[str]]]) -> None:
    await cn.execute_ddl(
        f"CREATE TABLE IF NOT EXISTS {DB}.refused (id INT NOT NULL PRIMARY KEY, "
        "s VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_german2_ci)",
        shard_key="id",
        partitions=4,
    )
    async with cn.transaction() as tx:
        await tx.execute(f"INSERT INTO {DB}.refused (id, s) VALUES (1, 'ä'), (2, 'b')")
    for table, (charset, name, _) in tables.items():
        await cn.execute_ddl(
            f"CREATE TABLE IF NOT EXISTS {DB}.{table} ({_column(charset, name)}, PRIMARY KEY (s))",
            shard_key="s",
            # A key not made of integers is read in one page per shard, at most PAGE_ROWS
            # (16) rows: the words spread over 8 shards fit.
            partitions=8,
        )
    async with cn.transaction() as tx:
        for table, (_, _, words) in tables.items():
            values = ", ".join(["(%s)"] * len(words))
            await tx.execute(f"INSERT INTO {DB}.{table} (s) VALUES {values}", words)


async def _drop(cn: ComputeNode, tables: list[str]) -> None:
    for table in tables:
        await cn.execute_ddl(f"DROP TABLE IF EXISTS {DB}.{table}")


def _with_cn(cfg, step: Callable[[ComputeNode], Awaitable[None]]) -> None:
    async def run() -> None:
        cn = ComputeNode(cfg)
        await cn.start()
        warnings.simplefilter("ignore", pymysql.Warning)
        try:
            await step(cn)
        finally:
            await cn.close()

    asyncio.run(asyncio.wait_for(run(), 120))


def _query(snap, sql: str) -> list[tuple]:
    conn = snap.connect(charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def tables(snap):
    """table → (its collation, MariaDB's order of its keys, (MIN, MAX)), once the rows are in
    the global binlog."""
    out, create = {}, {}
    for i, (charset, name) in enumerate(THROUGH_DUMPER):
        order, bounds = _reference(snap, charset, name)
        out[f"t{i}"] = (name, order, bounds)
        create[f"t{i}"] = (charset, name, order)
    create["refused_key"] = ("utf8mb4", "utf8mb4_german2_ci", ["a"])
    _with_cn(snap.config, lambda cn: _create(cn, create))
    try:
        deadline = time.monotonic() + 60
        for table, (_, order, _) in out.items():
            while _query(snap, f"SELECT COUNT(*) FROM {DB}.{table}")[0][0] != len(order):
                assert time.monotonic() < deadline, f"{DB}.{table} did not reach the binlog"
                time.sleep(0.3)
        yield out
    finally:
        # The package's later tests compare the whole cluster with a replica seeded by a
        # dump of bank and shop (test_mariadb_dump): these tables are not for them.
        _with_cn(snap.config, lambda cn: _drop(cn, [*create, "refused"]))


def test_keys_in_each_collation_come_in_mariadbs_order(snap, tables):
    for table, (name, order, (low, high)) in tables.items():
        got = [_text(r[0]) for r in _query(snap, f"SELECT s FROM {DB}.{table}")]
        assert got == order, name
        desc = [_text(r[0]) for r in _query(snap, f"SELECT s FROM {DB}.{table} ORDER BY s DESC")]
        assert desc == order[::-1], name
        (got_low, got_high), *_ = _query(snap, f"SELECT MIN(s), MAX(s) FROM {DB}.{table}")
        assert (_text(got_low), _text(got_high)) == (low, high), name


def test_another_collation_is_refused_naming_it(snap, tables):
    """Ordering or comparing a column in a collation without exact weights is refused (1235
    naming it), a key in one (the shards merge in its order) too; reading one is not."""
    for sql in (
        f"SELECT s FROM {DB}.refused ORDER BY s",
        f"SELECT MAX(s) FROM {DB}.refused",
        f"SELECT id FROM {DB}.refused WHERE s = 'a'",
        f"SELECT COUNT(*) FROM {DB}.refused_key",
    ):
        with pytest.raises(pymysql.err.MySQLError) as err:
            _query(snap, sql)
        assert err.value.args[0] == 1235 and "utf8mb4_german2_ci" in err.value.args[1], sql
    assert _query(snap, f"SELECT id, s FROM {DB}.refused ORDER BY id") == [(1, "ä"), (2, "b")]


@pytest.mark.parametrize(("charset", "name"), IN_PROCESS, ids=[n for _, n in IN_PROCESS])
def test_where_over_a_before_image_as_the_dn_compares(snap, charset, name):
    """`s < w`, `s = w` for each pair of words, as the DN answers them and as the dumper's
    WHERE over a before-image does (the DN's answers fetched in one statement)."""
    words = _storable(charset)
    with _scratch(snap, "w", f"i INT PRIMARY KEY, {_column(charset, name)}") as cur:
        cur.executemany("INSERT INTO mysql.w VALUES (%s, %s)", list(enumerate(words)))
        cur.execute(
            "SELECT a.i, b.i, a.s < b.s, a.s = b.s FROM mysql.w a JOIN mysql.w b ORDER BY 1, 2"
        )
        answers = cur.fetchall()
    column = ColumnDef(b"", b"", b"", b"s", b"s", 45, 64, 253, 0, 0, b"", declared=name)
    assert collation(name).supported
    wheres = {
        (op, j): parse(f"SELECT * FROM t WHERE s {op} '{w}'").where
        for op in ("<", "=")
        for j, w in enumerate(words)
    }
    wrong = []
    for i, j, less, equal in answers:
        for op, expected in (("<", less), ("=", equal)):
            got = matches(wheres[op, j], lambda _c, i=i: (column, words[i].encode()))
            if got != bool(expected):
                wrong.append(f"{words[i]!r} {op} {words[j]!r}: DN {expected}, dumper {got}")
    assert not wrong, f"{name}: {wrong[:10]}"
