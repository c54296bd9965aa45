"""What the CN leaves in each DN binlog: TraceId hints in ANNOTATE_ROWS events, XA branches,
commit records and heartbeats, as docs/cn.md specifies (read with python-mysql-replication)."""

from __future__ import annotations

import re
from collections import defaultdict

from pymysqlreplication.event import MariadbAnnotateRowsEvent, QueryEvent, XAPrepareEvent
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from cdc.cn_protocol.catalogue import partition_of
from tests.cn.binlog_reader import master_position, read_events

HINT = re.compile(rb"^/\*CDC trace=(\d+)\.(\d+) cn=(\d+) \*/ ")


async def test_binlog_has_hints_records_and_heartbeats(cn, cn_config):
    await cn.execute_ddl(
        "CREATE TABLE IF NOT EXISTS binlog_test.t (id INT PRIMARY KEY, v VARCHAR(32))",
        shard_key="id",
        partitions=3,
    )
    start = {n.id: master_position(n) for n in cn_config.dn}
    table = cn.catalogue.table("binlog_test", "t")
    # Keys on three different DNs; ids chosen so that each partition gets one.
    keys = {}
    for k in range(1000, 2000):
        keys.setdefault(table.placement[partition_of(k, 3)], k)
        if len(keys) == 3:
            break
    ids = [keys[dn] for dn in sorted(keys)]
    async with cn.transaction() as tx:
        await tx.execute("DELETE FROM binlog_test.t WHERE id IN (%s, %s, %s)", ids)
        await tx.execute(
            "INSERT INTO binlog_test.t (id, v) VALUES (%s, 'a'), (%s, 'b'), (%s, 'c')", ids
        )
        await tx.execute("UPDATE binlog_test.t SET v = 'z' WHERE id = %s", (ids[2],))
    txn_tso, txn_id = tx.commit_tso, tx.txn_id
    hb_tso = await cn.heartbeat_once()

    for node in cn_config.dn:
        hints, records, heartbeats, xa = [], {}, [], defaultdict(list)
        for ev in read_events(node, *start[node.id]):
            if isinstance(ev, MariadbAnnotateRowsEvent):
                m = HINT.match(ev.sql_statement)
                if m and b"binlog_test_p" in ev.sql_statement:
                    hints.append((int(m[1]), int(m[2]), int(m[3])))
            elif isinstance(ev, WriteRowsEvent | UpdateRowsEvent) and ev.schema == "__cdc__":
                for row in ev.rows:
                    values = row.get("after_values", row.get("values"))
                    if ev.table == "__cdc_tx_log__":
                        records[values["txn_id"]] = values
                    elif ev.table == "__cdc_heartbeat__":
                        heartbeats.append(values)
            elif isinstance(ev, XAPrepareEvent):
                xa["prepare"].append(ev.xid)
            elif isinstance(ev, QueryEvent) and ev.query.startswith("XA COMMIT"):
                xa["commit"].append(ev.query)
        # The txn's statements on this DN, in TraceId order, all tagged by our server_id.
        assert hints, f"DN {node.id}: no TraceId hints"
        assert hints == sorted(hints) and {h[2] for h in hints} == {cn_config.cn.server_id}
        assert {h[0] for h in hints} <= {1, 2, 3}
        # The commit record: TSO and participants (primary first = the first DN touched).
        rec = records[txn_id]
        assert rec["commit_tso"] == txn_tso and rec["aborted"] == 0
        primary = table.placement[partition_of(ids[0], 3)]
        assert rec["participants"].split(",")[0] == str(primary)
        assert sorted(rec["participants"].split(",")) == ["1", "2", "3"]
        # The heartbeat touched this DN, and its commit record carries its TSO.
        assert any(h["cn_id"] == cn.instance_id for h in heartbeats)
        assert hb_tso in {r["commit_tso"] for r in records.values()}
        assert len(xa["prepare"]) >= 2 and len(xa["commit"]) >= 2
