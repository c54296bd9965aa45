"""Routing of the supported statement shapes, without a database."""

from __future__ import annotations

import random

import pytest

from cdc.cn_protocol.catalogue import BROADCAST, PARTITIONED, Catalogue, LogicalTable, partition_of
from cdc.cn_protocol.errors import CatalogueError, RoutingError
from cdc.cn_protocol.sql import render
from cdc_equipment.cn.router import Plan, ShardKeyMove, route


@pytest.fixture
def cat() -> Catalogue:
    c = Catalogue(dns=[1, 2, 3])
    c.put(LogicalTable("bank", "accounts", PARTITIONED, "id", [1, 2, 3, 1, 2, 3, 1, 2]))
    c.put(LogicalTable("bank", "rates", BROADCAST))
    return c


def test_update_by_shard_key_goes_to_one_partition(cat):
    plan = route(
        render("UPDATE bank.accounts SET balance = balance - %s WHERE id = %s", (5, 7)), cat
    )
    assert isinstance(plan, Plan)
    p = partition_of(7, 8)
    (st,) = plan.statements
    assert st.partition == p and st.dn_id == cat.table("bank", "accounts").placement[p]
    assert st.sql == f"UPDATE `bank_p`.`accounts_p{p:04d}` SET balance = balance - 5 WHERE id = 7"


def test_string_and_int_keys_hash_alike(cat):
    a = route("DELETE FROM bank.accounts WHERE id = 7", cat).statements
    b = route("DELETE FROM bank.accounts WHERE id = '7' AND balance > 0", cat).statements
    assert [s.partition for s in a] == [s.partition for s in b]


def test_multi_row_insert_is_split_by_shard(cat):
    rows = [(i, f"n{i}") for i in range(20)]
    sql = "INSERT INTO bank.accounts (id, name) VALUES " + ", ".join(["(%s, %s)"] * 20)
    plan = route(render(sql, [v for r in rows for v in r]), cat)
    parts = {s.partition for s in plan.statements}
    assert parts == {partition_of(i, 8) for i in range(20)}
    assert sum(s.sql.count("(") for s in plan.statements) == 20 + len(plan.statements)
    for s in plan.statements:
        assert f"accounts_p{s.partition:04d}" in s.sql


def test_in_list_and_scattered_select(cat):
    plan = route("SELECT * FROM bank.accounts WHERE id IN (1, 2, 3) FOR UPDATE", cat)
    assert {s.partition for s in plan.statements} == {partition_of(i, 8) for i in (1, 2, 3)}
    assert all(s.sql.endswith("FOR UPDATE") for s in plan.statements)
    scattered = route("SELECT SUM(balance) FROM bank.accounts", cat)
    assert [s.partition for s in scattered.statements] == list(range(8)) and scattered.is_select


def test_writes_without_shard_key_are_rejected(cat):
    with pytest.raises(RoutingError, match="needs `WHERE id = <value>`"):
        route("UPDATE bank.accounts SET balance = 0", cat)
    with pytest.raises(RoutingError, match="needs `WHERE id"):
        route("DELETE FROM bank.accounts WHERE id = 1 OR id = 2", cat)
    with pytest.raises(RoutingError, match="must list its shard key"):
        route("INSERT INTO bank.accounts (balance) VALUES (1)", cat)
    with pytest.raises(CatalogueError, match="unknown logical table"):
        route("SELECT * FROM bank.nope", cat)
    with pytest.raises(RoutingError, match="routes INSERT/UPDATE/DELETE/SELECT only"):
        route("CALL p()", cat)


def test_broadcast_writes_go_everywhere(cat):
    plan = route("UPDATE bank.rates SET rate = 2 WHERE code = 'EUR'", cat)
    assert [s.dn_id for s in plan.statements] == [1, 2, 3]
    assert "`bank_p`.`rates_b`" in plan.statements[0].sql


def test_shard_key_update_becomes_a_move(cat):
    old, new = 1, next(k for k in range(2, 100) if partition_of(k, 8) != partition_of(1, 8))
    plan = route(f"UPDATE bank.accounts SET id = {new}, note = 'moved' WHERE id = {old}", cat)
    assert isinstance(plan, ShardKeyMove)
    assert plan.old_partitions == [partition_of(old, 8)]
    assert plan.new_partition == partition_of(new, 8)
    assert plan.assignments == {"id": str(new), "note": "'moved'"}
    assert plan.select_sql(plan.old_partitions[0]).endswith(f"WHERE id = {old} FOR UPDATE")


def test_literals_survive_rendering(cat):
    sql = render(
        "INSERT INTO bank.accounts (id, name, data) VALUES (%s, %s, %s)",
        (3, "it's 😀 中文 \\ %", b"\x00\xff'"),
    )
    (st,) = route(sql, cat).statements
    assert "'it\\'s 😀 中文 \\\\ %'" in st.sql and "X'00ff27'" in st.sql


def test_the_regex_tokenizer_matches_the_character_one():
    """`tokenize` takes a regex step per token for ASCII text; `_tokenize_chars` is the plain
    character loop (kept for non-ASCII text): same tokens, same errors, on random SQL-ish text."""
    from cdc.cn_protocol.sql_text import _tokenize_chars, tokenize

    pieces = [*"abcXxBb_@$019.'\"`\\ \t\n/*-#%<>=!:;(),+", "--", "/*", "*/", "%s", "_binary'", "X'"]
    rng = random.Random(7)

    def run(f, s):
        try:
            return f(s)
        except RoutingError as exc:
            return str(exc)

    for _ in range(20_000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        assert run(tokenize, s) == run(_tokenize_chars, s), s
