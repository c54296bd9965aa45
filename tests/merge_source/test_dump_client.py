"""The DN dump client against real MariaDB servers: contiguous positions, CRC, resume, restart."""

from __future__ import annotations

import asyncio

import pytest

from cdc.protocol import BinlogPosition, DnEvent, DumpClient, DumpError, DumpSettings
from cdc_equipment.local_cluster.testing import throwaway_cluster

XA_PREPARE_EVENT = 38
ANNOTATE_ROWS_EVENT = 160


def settings(server, **kw) -> DumpSettings:
    return DumpSettings(
        "127.0.0.1",
        server.port,
        "root",
        "",
        server_id=9000 + server.server_id,
        name=server.name,
        **kw,
    )


async def collect(client: DumpClient, until, timeout: float = 20.0) -> list[DnEvent]:
    events: list[DnEvent] = []

    async def run():
        async for batch in client.batches():
            events.extend(batch)
            if until(events):
                return

    await asyncio.wait_for(run(), timeout)
    return events


def assert_contiguous(events: list[DnEvent]) -> None:
    for prev, cur in zip(events, events[1:], strict=False):
        # A dump started mid-file opens with the file's FDE re-sent: the gap after it is real.
        if cur.file == prev.file and cur.pos != 4 and prev.type_code != 15:
            assert cur.pos == prev.end, (prev, cur)


def run_sql(server, *statements: str) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


async def test_dump_reads_xa_groups_with_annotations(cluster):
    dn = cluster.dn(1)
    with dn.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    run_sql(
        dn,
        "CREATE DATABASE IF NOT EXISTS dumptest",
        "CREATE TABLE IF NOT EXISTS dumptest.t (id INT PRIMARY KEY, v VARCHAR(20))",
        "XA START 'dump-x1'",
        "/*CDC trace=1.0 cn=7 */ INSERT INTO dumptest.t VALUES (1, 'a')",
        "XA END 'dump-x1'",
        "XA PREPARE 'dump-x1'",
        "XA COMMIT 'dump-x1'",
    )
    client = DumpClient(settings(dn), BinlogPosition(file, pos))
    events = await collect(client, lambda ev: any(e.data.find(b"XA COMMIT") >= 0 for e in ev))
    types = [e.type_code for e in events]
    assert XA_PREPARE_EVENT in types and ANNOTATE_ROWS_EVENT in types
    assert any(b"/*CDC trace=1.0 cn=7 */" in e.data for e in events)
    assert_contiguous(events)
    assert events[0].type_code == 15 and events[1].pos == pos  # re-sent FDE, then from `pos`
    assert client.position == BinlogPosition(file, events[-1].end)


async def test_unknown_file_is_a_clear_error(cluster):
    client = DumpClient(settings(cluster.dn(2)), BinlogPosition("binlog.999999", 4))
    with pytest.raises(
        DumpError, match=r"dn2 .* binlog\.999999:4: DN refused the binlog dump: \(1236"
    ):
        await collect(client, lambda ev: False, timeout=10)


async def test_resume_after_dn_restart_loses_and_repeats_nothing(tmp_path):
    cluster = throwaway_cluster(tmp_path, dns=1, spare_dns=0)
    try:
        dn = cluster.dn(1)
        run_sql(dn, "CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY)")
        client = DumpClient(
            settings(dn, heartbeat_period=0.2, idle_timeout=2), BinlogPosition("binlog.000001", 4)
        )
        seen: list[int] = []
        events: list[DnEvent] = []

        async def consume():
            async for batch in client.batches():
                for e in batch:
                    events.append(e)
                    if e.type_code in (23, 30):  # rows: the id is the last 4 bytes before the CRC
                        seen.append(int.from_bytes(e.data[-8:-4], "little"))
                if len(seen) >= 40:
                    return

        task = asyncio.create_task(consume())
        for i in range(20):
            run_sql(dn, f"INSERT INTO r.t VALUES ({i})")
        await asyncio.sleep(0.5)
        await asyncio.to_thread(dn.kill)
        await asyncio.sleep(0.3)
        await asyncio.to_thread(dn.start)
        for i in range(20, 40):
            run_sql(dn, f"INSERT INTO r.t VALUES ({i})")
        await asyncio.wait_for(task, 30)
        assert seen == list(range(40))
        assert client.reconnects >= 1
        assert {e.file for e in events} >= {"binlog.000001", "binlog.000002"}
        assert_contiguous(events)
    finally:
        cluster.down()
