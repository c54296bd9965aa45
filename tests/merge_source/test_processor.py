"""SourceProcessor on a real DN binlog: the commit protocol run by hand, statement by statement,
so every interleaving the issue names happens exactly as written."""

from __future__ import annotations

import asyncio

import pytest

from cdc.cn_protocol.schema import PRIVATE_TABLES
from cdc.keys import Kind, SortKey
from cdc.protocol import BinlogPosition, DumpClient, DumpSettings
from merge_source.fragment import Fragment, FragmentKind, Watermark
from merge_source.processor import SourceProcessor
from tests.merge_source.record_fixtures import Branch


@pytest.fixture(scope="module")
def dn(cluster):
    dn = cluster.dn(3)
    with dn.connect() as conn, conn.cursor() as cur:
        for sql in PRIVATE_TABLES:
            cur.execute(sql)
        cur.execute("CREATE DATABASE IF NOT EXISTS proc_p")
        cur.execute("CREATE TABLE IF NOT EXISTS proc_p.t_p0000 (id INT PRIMARY KEY, v VARCHAR(32))")
    return dn


def master_position(dn) -> BinlogPosition:
    with dn.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return BinlogPosition(file, pos)


async def process(
    dn, start: BinlogPosition, processor: SourceProcessor
) -> list[Fragment | Watermark]:
    """Feed everything from `start` to the current end of the binlog through `processor`."""
    end = master_position(dn)
    client = DumpClient(
        DumpSettings("127.0.0.1", dn.port, "root", "", 7300 + dn.server_id, dn.name), start
    )
    out: list[Fragment | Watermark] = []

    async def run():
        async for batch in client.batches():
            for event in batch:
                out.extend(processor.feed(event))
            if client.position >= end:
                return

    await asyncio.wait_for(run(), 20)
    return out


def fragments(out) -> list[Fragment]:
    return [o for o in out if isinstance(o, Fragment)]


async def test_commit_records_in_opposite_order_of_tsos(dn):
    start = master_position(dn)
    a = Branch(dn, 1001, 3).prepare("INSERT INTO proc_p.t_p0000 VALUES (1, 'a')")
    b = Branch(dn, 1002, 3).prepare(
        "INSERT INTO proc_p.t_p0000 VALUES (2, 'b')", "UPDATE proc_p.t_p0000 SET v='bb' WHERE id=2"
    )
    b.record(200)
    b.commit()
    a.record(100)
    a.commit()
    out = await process(dn, start, SourceProcessor(3))
    frags = fragments(out)
    assert [(f.txn_id, f.tso) for f in frags] == [(1001, 100), (1002, 200)]
    assert [s.trace_id for s in frags[1].statements] == [(1, 0), (2, 0)]
    assert all(f.kind is FragmentKind.DATA and f.participants == (3,) for f in frags)
    # TABLE_MAP + WRITE_ROWS for the insert, TABLE_MAP + UPDATE_ROWS for the update
    assert [[e[4] for e in s.events] for s in frags[1].statements] == [[19, 23], [19, 24]]
    assert isinstance(out[-1], Watermark) and out[-1].key.tso == 200


async def test_prepared_branch_blocks_until_rollback_then_local_and_heartbeat(dn):
    start = master_position(dn)
    slow = Branch(dn, 2001, 3).prepare("INSERT INTO proc_p.t_p0000 VALUES (10, 'slow')")
    fast = Branch(dn, 2002, 3).prepare("INSERT INTO proc_p.t_p0000 VALUES (11, 'fast')")
    fast.record(300)
    fast.commit()
    processor = SourceProcessor(3)
    assert fragments(await process(dn, start, processor)) == []  # slow blocks fast
    cp = processor.checkpoint()
    assert (
        cp is not None
        and (cp.file, cp.position) == (start.file, start.pos)
        and cp.max_tso_seen == 0
    )

    resume = master_position(dn)
    slow.rollback()
    with dn.connect() as conn, conn.cursor() as cur:  # a local transaction, no XA
        cur.execute("INSERT INTO proc_p.t_p0000 VALUES (12, 'local')")
    hb = Branch(dn, 2003, 3).prepare(
        "REPLACE INTO __cdc__.__cdc_heartbeat__ VALUES (1, 2003, NOW(6))"
    )
    hb.record(400)
    hb.commit()
    out = await process(dn, resume, processor)
    frags = fragments(out)
    assert [(f.txn_id, f.kind) for f in frags] == [
        (2002, FragmentKind.DATA),
        (0, FragmentKind.LOCAL),
    ]
    assert frags[1].key.kind is Kind.LOCAL and frags[1].key.tso == 300  # right after 300
    assert isinstance(out[-1], Watermark) and out[-1].key.tso == 400  # heartbeat: no fragment
    assert out[-1].checkpoint == processor.checkpoint()
    cp = processor.checkpoint()
    assert cp.position == master_position(dn).pos and cp.max_tso_seen == 400


async def test_restart_from_checkpoint_neither_repeats_nor_skips(dn):
    start = master_position(dn)
    held = Branch(dn, 3001, 3).prepare("INSERT INTO proc_p.t_p0000 VALUES (20, 'held')")
    done = Branch(dn, 3002, 3).prepare("INSERT INTO proc_p.t_p0000 VALUES (21, 'done')")
    held.record(600)
    done.record(500)
    done.commit()
    first = SourceProcessor(3)
    out1 = fragments(await process(dn, start, first))
    assert [f.txn_id for f in out1] == [3002]
    cp = first.checkpoint()
    assert (cp.file, cp.position) == (start.file, start.pos)  # `held` still pending from there
    held.commit()
    # Restart: re-read from the checkpoint, dropping what was already emitted.
    second = SourceProcessor(3, resume_after=out1[-1].global_key, max_tso_seen=cp.max_tso_seen)
    out2 = fragments(await process(dn, BinlogPosition(cp.file, cp.position), second))
    assert [f.txn_id for f in out2] == [3001]
    assert out2[0].key > out1[-1].key


async def test_non_cdc_xa_is_a_local_transaction_when_committed(dn):
    start = master_position(dn)
    with dn.connect() as conn, conn.cursor() as cur:
        cur.execute("XA START 'someone-else'")
        cur.execute("INSERT INTO proc_p.t_p0000 VALUES (30, 'foreign')")
        cur.execute("XA END 'someone-else'")
        cur.execute("XA PREPARE 'someone-else'")
        cur.execute("XA COMMIT 'someone-else'")
    frags = fragments(await process(dn, start, SourceProcessor(3)))
    assert [(f.kind, f.txn_id) for f in frags] == [(FragmentKind.LOCAL, 0)]
    assert frags[0].key == SortKey(frags[0].key.tso, Kind.LOCAL, frags[0].key.seq)


async def test_markers_switch_names_at_their_tso(dn):
    import json

    from merge_source.classifier import table_name

    topology = {
        "dns": [{"id": 3}],
        "tables": [
            {
                "db": "proc",
                "table": "t",
                "kind": "partitioned",
                "physical": [{"partition": 0, "dn": 3, "db": "proc_p", "table": "t_p0000"}],
            },
        ],
    }
    with dn.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS proc_p.unmapped (id INT PRIMARY KEY)")
    start = master_position(dn)
    content = json.dumps(topology).replace("'", "''")
    Branch(dn, 4001, 3).prepare(
        f"INSERT INTO __cdc__.__cdc_instruction__ (id, type, content) VALUES (4001, 'CdcStart', '{content}')"
    ).record(700).commit()
    Branch(dn, 4002, 3).prepare(
        "INSERT INTO proc_p.t_p0000 VALUES (40, 'renamed')",
        "INSERT INTO proc_p.unmapped VALUES (1)",
    ).record(710).commit()
    frags = fragments(await process(dn, start, SourceProcessor(3)))
    assert [(f.txn_id, f.kind) for f in frags] == [
        (4001, FragmentKind.INSTRUCTION),
        (4002, FragmentKind.DATA),
    ]
    assert frags[0].markers[0]["type"] == "CdcStart"
    [statement] = frags[1].statements  # the unmapped table's statement is gone
    assert table_name(statement.events[0]) == (b"proc", b"t")
    assert [e[4] for e in statement.events] == [19, 23]
